"""`qa-finetune serve`: the HTTP answering service (FastAPI on uvicorn), no TensorFlow import."""
