"""What Horovod's frameworks share (horovod.common): the elastic State and
run loop, and the exceptions that drive them."""
