from ..common.console import exit_flushed
from .launcher import main

# The program has ended and its status is reported: mpirun's end waits for every rank's launcher.
exit_flushed(main())
