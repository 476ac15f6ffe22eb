"""The GPU data plane gateway: supervises the vLLM OpenAI server and fronts it on :8080 for SageMaker."""
