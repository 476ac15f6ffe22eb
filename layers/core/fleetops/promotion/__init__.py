"""Model promotion: the gates a new model passes before any user sees it (the offline evaluation first)."""
