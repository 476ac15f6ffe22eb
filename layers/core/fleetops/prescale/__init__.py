"""Release-calendar pre-scaling: plan scheduled actions from the calendar and reconcile them."""
