"""What a cluster adds to training: the task's place in the cluster, the
protocol by which the tasks start and stop, recovery, and the pieces of the
distributed schemes. Built on `guide.training`, never the other way round."""
