"""Alarm-driven remediation: the declarative playbook, alarm-event parsing and the pure decision core.

``models`` holds the playbook (``fleet_config/playbook.yaml``), ``alarm`` turns an EventBridge
``CloudWatch Alarm State Change`` event into kind/endpoint/variant/breach, ``decide`` maps that plus
the safety-rail state to actions, and ``responder`` applies them through this capability's adapters
(``state_table``, ``rollback_workflow``) and the shared ones of :mod:`fleetops.aws`.
"""
