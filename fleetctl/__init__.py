"""``fleetctl``: the operator's command line for the fleet's control plane (README, Operate).

One command per question: what is the fleet doing (``status``), why (``why``), what will the calendar do
(``calendar``, ``plan``), and how to stop or undo it (``kill-switch``, ``rollout``, ``rollback``). The
deployed stack is named with ``--stack``; every resource is found from its CloudFormation outputs.
"""
