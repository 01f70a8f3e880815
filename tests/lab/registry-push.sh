#!/usr/bin/env bash
# Copy an engine stand-in tarball (a `docker save` in .lab/images) into the lab registry under REPO:TAG, with skopeo
# inside the registry container, which mounts .lab/images read-only at /srv/sparkops-lab/images.
# Idempotent: when the tag already holds the tarball's image (the manifest's config digest is the image id that
# build-images.sh recorded beside the tarball, <tarball>.id), nothing is copied.
# Prints "changed REPO:TAG" when it copied, then "digest sha256:..." (the tag's manifest digest, which a node pulls
# by: <registry>/REPO@sha256:...).
# Usage: registry-push.sh CONTAINER TARBALL_NAME REPO:TAG
set -euo pipefail
container=$1 tarball=$2 ref=$3
images=/srv/sparkops-lab/images
dest="docker://127.0.0.1:5000/$ref"
want=$(docker exec "$container" cat "$images/$tarball.id")
have=$(docker exec "$container" skopeo inspect --tls-verify=false --raw "$dest" 2>/dev/null \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["config"]["digest"])' 2>/dev/null || true)
if [ "$have" != "$want" ]; then
  docker exec "$container" skopeo copy --quiet --dest-tls-verify=false "docker-archive:$images/$tarball" "$dest"
  echo "changed $ref"
fi
docker exec "$container" skopeo inspect --tls-verify=false "$dest" \
  | python3 -c 'import json, sys; print("digest", json.load(sys.stdin)["Digest"])'
