"""Fine-tuning: what a defence is, backbones, the training loop and its checkpoint cache, given checkpoints."""
