# Read by the debug container's interactive shell (busybox ash reads $ENV when interactive).
#
# The prompt sits between the OSC 133 "semantic prompt" marks: A before it, B after it. The
# break-glass relay reads them in the terminal's output and records each command line typed
# after a B as a marker on the recording's timeline (`$ kubectl get pods`, with its time).
# \[ and \] tell the line editor the marks take no room on the screen.
PS1="\[$(printf '\033]133;A\007')\]debug:\w\\$ \[$(printf '\033]133;B\007')\]"
