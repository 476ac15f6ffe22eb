"""Pure formatting: report models in, rich renderables out (no AWS, no clock)."""
