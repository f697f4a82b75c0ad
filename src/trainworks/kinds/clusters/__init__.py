"""Training clusters (v1beta1 modelDevelopmentClusters): Slurm clusters on this host; changes are LROs."""
