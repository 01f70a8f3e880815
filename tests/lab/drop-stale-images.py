"""Untag, on every lab node, the lab images that a rebuild replaced.

The nodes load the lab's image tarballs (.lab/images, read-only under /srv/sparkops-lab/images) only when the
image name is missing (trtllm_container_image_archive), so after `make lab-up` rebuilt an image (e.g. a changed
stand-in) a node would keep serving the old one under the same name. For each tarball this reads its tags
(manifest.json in the tarball) and the image id build-images.sh recorded beside it (<tarball>.id), and on each
node whose copy of a tag has another id, removes that tag (`docker image rm --force`: running containers keep
their image by id; the next converge loads the new tarball and, its image id having moved, asks for consent to
recreate the container). Prints one line per change ("changed <tag> on <node>: <old id> -> <new id>").

Usage: python3 drop-stale-images.py IMAGES_DIR CONTAINER...
"""

import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path


def tags_of(tarball):
    with tarfile.open(tarball) as tar:
        member = tar.extractfile("manifest.json")
        manifest = json.load(member) if member else []
    return [tag for entry in manifest for tag in (entry.get("RepoTags") or [])]


def node_docker(node, *args):
    return subprocess.run(["docker", "exec", node, "docker", *args], capture_output=True, text=True, check=False)


def wait_for_docker(node, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if node_docker(node, "info", "--format", "{{.ID}}").returncode == 0:
            return True
        time.sleep(1)
    return False


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    images = Path(argv[1])
    wanted = {}
    for tarball in sorted(images.glob("*.tar")):
        id_file = tarball.with_name(tarball.name + ".id")
        if not id_file.is_file():
            continue
        image_id = id_file.read_text().strip()
        for tag in tags_of(tarball):
            wanted[tag] = image_id
    status = 0
    for node in argv[2:]:
        if not wait_for_docker(node):
            print("%s: its Docker engine does not answer" % node, file=sys.stderr)
            status = 1
            continue
        for tag, image_id in sorted(wanted.items()):
            have = node_docker(node, "image", "inspect", "--format", "{{.Id}}", tag)
            if have.returncode != 0 or have.stdout.strip() == image_id:
                continue
            gone = node_docker(node, "image", "rm", "--force", tag)
            if gone.returncode != 0:
                print("%s: cannot remove %s: %s" % (node, tag, gone.stderr.strip()), file=sys.stderr)
                status = 1
                continue
            print("changed %s on %s: %s -> %s" % (tag, node, have.stdout.strip()[:19], image_id[:19]))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
