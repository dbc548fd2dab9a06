"""The library's source files that the layout checks read (check_includes.py, check_sizes.py)."""
import os

SOURCE_DIRS = ('pmpi', 'core', 'cuda')


def source_files(root, extensions):
    """Paths relative to root, '/'-separated, of the files under SOURCE_DIRS ending in `extensions`."""
    for top in SOURCE_DIRS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(extensions):
                    yield os.path.relpath(os.path.join(folder, name), root).replace(os.sep, '/')
