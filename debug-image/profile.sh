# Read by the debug container's interactive shell (busybox ash reads $ENV when interactive).
#
# The prompt sits between the OSC 133 "semantic prompt" marks: A before it, B after it. The
# break-glass relay reads them in the terminal's output and records each command line typed
# after a B as a marker on the recording's timeline (`$ kubectl get pods`, with its time).
#
# The image's shell, busybox ash, expands prompt escapes: \w is the directory, \$ is # for root,
# and \[ \] tell its line editor the marks take no room on the screen. A plain POSIX shell
# (dash, where the image's files are run on another system's shell) expands none of them, and
# would print them as they are: it is given a prompt in parameters it does expand, with the
# directory's last part (as short as the image's `~`, so typed lines do not wrap early).
if (eval 'x=ab; [ "${x/a/}" = b ]') 2>/dev/null; then
    PS1="\[$(printf '\033]133;A\007')\]debug:\w\\$ \[$(printf '\033]133;B\007')\]"
else
    PS1="$(printf '\033]133;A\007')debug:\${PWD##*/}\$ $(printf '\033]133;B\007')"
fi
