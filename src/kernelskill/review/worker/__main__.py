"""`python -m kernelskill.review.worker FD PARENT_PID DEVICE SOCKET_FD`: a review worker (sandbox.WorkerPool
starts it). Nothing is imported here that starts a thread: `main` confines the process first."""

from kernelskill.review.worker.serve import main

if __name__ == "__main__":
    main()
