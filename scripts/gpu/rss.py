"""Peak RSS (VmHWM, KiB) of a command: runs it and reads its /proc status just before it
exits by polling. Simpler: runs the command under python's resource accounting."""
import resource
import subprocess
import sys

subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
