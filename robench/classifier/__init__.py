"""The classifier under test, below training and the engine: its device, its backbone, and its counted queries."""
