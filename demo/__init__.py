"""`make demo`: a release day, locally, on emulated AWS (and a real vLLM engine on the CPU)."""
