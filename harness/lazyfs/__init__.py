"""A FUSE filesystem that loses what was not fsynced, on command.

``kraftwerk fs mount DIR --backing DIR2`` serves DIR from DIR2. Everything a
program changes under DIR is kept in the filesystem's own memory — a page
cache of its own — and reaches DIR2 only when the program makes it durable.
``kraftwerk fs crash DIR`` then drops everything not yet durable, as a power
loss drops a machine's page cache; the program under test sees the same
files a rebooted machine would show it. It works under any program (the
reference broker, Apache Kafka, anything that writes files).

What is durable when (the rules a program is tested against):

* **File data and size** (write, truncate, extending writes) live in the
  cache until ``fsync`` or ``fdatasync`` on that file. Both flush the data
  and the size: the size is the one piece of metadata a later read needs,
  which fdatasync must persist too (fsync(2)); mode and times are not
  tracked for loss. A file's fsync does *not* make its name durable
  (POSIX promises nothing more, and ext4 without its journal commit would
  not either).
* **Names** (create, mkdir, symlink, unlink, rmdir, rename) are one ordered
  metadata journal, as ext4 and XFS keep. ``fsync`` of any directory commits
  the whole journal so far, in order: the changes made in that directory and
  every earlier one (a journalling filesystem cannot commit a later
  metadata change without the earlier ones). A directory fsync makes no
  file's data durable: a file created, written and only its directory
  fsynced survives empty.
* A file whose data was fsynced before its name was committed keeps that
  data once the name commits; if the crash comes first, it is gone.
* ``umount`` is a clean shutdown: it flushes everything first (as
  ``sync``). A crash (or a killed server) before it loses what the rules
  above say.

Faults, over the control socket (``kraftwerk fs crash DIR [--torn [--seed N]]``):

* ``crash`` — drop every un-fsynced change and every uncommitted name; the
  tree is reloaded from the backing directory.
* ``crash torn`` — as ``crash``, but first each file with a committed name
  keeps a random prefix (seeded: ``--seed`` at mount, or the crash's own
  ``--seed``, ``crash torn N``) of the writes and truncations made to it
  since its last fsync, cut inside a write: a torn write as a power loss
  mid-flush leaves it. Its fsynced bytes are never touched.

Modules: :mod:`.model` (the cache and journal, no FUSE), :mod:`.ops` (the
pyfuse3 adapter), :mod:`.server` (the serving process and its control
socket), :mod:`.mounts` (mount, crash, umount, the registry ``kraftwerk
cleanup`` reads).
"""
