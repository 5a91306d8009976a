"""What every example needs whether or not it is distributed: flags, data,
model, report, logdir. Nothing here knows about a cluster."""
