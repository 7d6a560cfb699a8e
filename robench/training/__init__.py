"""Fine-tuning: what a defence is, the training loop and its checkpoint cache, given checkpoints."""
