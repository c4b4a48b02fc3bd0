"""The accelerator catalog (shipped data plus user files) that cost and plan share."""
