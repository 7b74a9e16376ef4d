"""PyTorch graphs (optional extra ``clusterkit[torch]``): placeholder, filled by the torch work."""
