#!/usr/bin/env bash
# Installs everything Berth needs, idempotently: Debian packages (as root), the npm packages exactly as
# package-lock.json pins them (`npm ci`, skipped when nothing changed), the build, and `berth` on the PATH.
# Downloads come only from the npm registry and Debian; every failure ends with one line saying what to do.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

say() { printf 'install: %s\n' "$*"; }
die() {
  printf 'install: %s\n' "$*" >&2
  exit 1
}

# --- Node and npm -------------------------------------------------------------------------------------------
command -v node >/dev/null || die "Node.js is missing: install Node 20 (20.19 or later), e.g. NodeSource's nodejs 20 package"
command -v npm >/dev/null || die "npm is missing: install the npm that comes with Node 20 (NodeSource's nodejs includes it)"
# The range of package.json "engines": dependencies need 20.19 (undici, chokidar) and 22.12 on the 22 line.
node -e '
  const [maj, min] = process.versions.node.split(".").map(Number);
  process.exit((maj === 20 && min >= 19) || (maj === 22 && min >= 12) || maj > 22 ? 0 : 1);
' || die "Node $(node -v) is not supported: install Node 20.19+ (tested) or 22.12+ and run this again"

# --- Debian packages ----------------------------------------------------------------------------------------
# Berth needs these at run time: sandboxes (bubblewrap, iproute2, nftables, util-linux: also fallocate, mkswap and
# swapon for deep standby's swap file), volumes (e2fsprogs), agents'
# git sources (git, run on the host with git made inert), the drive mount helper compiled at start (gcc, libc6-dev).
# node-gyp also needs a compiler, make and Python to build better-sqlite3 and node-pty.
SANDBOX_DEBS=(bubblewrap iproute2 nftables util-linux e2fsprogs git gcc libc6-dev)
missing_tools=()
command -v make >/dev/null || missing_tools+=(make)
command -v c++ >/dev/null || missing_tools+=(c++)
command -v python3 >/dev/null || missing_tools+=(python3)
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  missing=()
  for p in "${SANDBOX_DEBS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing_tools[@]} -gt 0 ] && missing+=(build-essential python3)
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing Debian packages: ${missing[*]}"
    apt-get update -qq || die "apt-get update failed (output above): check the network and /etc/apt/sources.list"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ||
      die "apt-get install ${missing[*]} failed (output above): fix apt, then run this again"
  fi
else
  [ ${#missing_tools[@]} -eq 0 ] ||
    die "missing ${missing_tools[*]} to compile native modules: as root, apt-get install build-essential python3"
  if [ "$(id -u)" != 0 ]; then
    say "not root: \`berth serve\` will serve everything but sandboxes (they need root and ${SANDBOX_DEBS[*]})"
  else
    say "no apt-get: install ${SANDBOX_DEBS[*]} yourself for sandboxes"
  fi
fi

# --- Node's headers -----------------------------------------------------------------------------------------
# node-gyp compiles against Node's headers, found under `<nodedir>/include/node` (with common.gypi). Without a
# nodedir it downloads them from nodejs.org, which an offline or registry-only machine cannot reach. Use the
# installed ones whose module ABI matches the running Node.
abi=$(node -p process.versions.modules)
nodedir=
for prefix in "${npm_package_config_node_gyp_nodedir:-}" "$(node -p 'process.config.variables.node_prefix')" \
  "$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")" /usr /usr/local; do
  h=$prefix/include/node
  [ -n "$prefix" ] && [ -f "$h/common.gypi" ] && [ -f "$h/node_version.h" ] || continue
  if grep -Eq "^#define NODE_MODULE_VERSION $abi\b" "$h/node_version.h"; then
    nodedir=$prefix
    break
  fi
done
[ -n "$nodedir" ] || die "Node $(node -v)'s headers (include/node/common.gypi) are not installed: with Debian's nodejs, apt-get install libnode-dev; NodeSource's nodejs ships them (apt-get install --reinstall nodejs); else set npm_package_config_node_gyp_nodedir=<prefix holding include/node>"

# --- npm packages -------------------------------------------------------------------------------------------
# `npm ci` installs exactly the lock; it is skipped when the lock, the manifests, Node's ABI and the headers
# are what the last successful run saw.
stamp=node_modules/.berth-install-stamp
want=$(cat package-lock.json package.json packages/*/package.json | sha256sum | cut -d' ' -f1)-node$abi-$nodedir
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log=$(mktemp "${TMPDIR:-/tmp}/berth-npm-ci.XXXXXX")
  say "npm ci (compiles better-sqlite3 and node-pty against $nodedir/include/node; a minute or two)"
  start=$SECONDS
  # build_from_source: prebuild-install (better-sqlite3) would otherwise fetch a binary from GitHub first.
  if ! npm_package_config_node_gyp_nodedir=$nodedir npm_config_build_from_source=true \
    npm ci --no-audit --no-fund --no-update-notifier >"$log" 2>&1; then
    tail -n 25 "$log" >&2
    if grep -Eq 'ENOTFOUND|ECONNREFUSED|ETIMEDOUT|EAI_AGAIN|ECONNRESET' "$log"; then
      die "npm ci could not reach $(npm config get registry 2>/dev/null) (full log: $log): check the network or point npm_config_registry at a mirror"
    elif grep -q 'gyp ERR!' "$log"; then
      die "compiling a native module failed (full log: $log): the compiler's error is above; build-essential and python3 must be installed"
    fi
    die "npm ci failed (full log: $log): the lines above say why"
  fi
  rm -f "$log"
  echo "$want" >"$stamp"
  say "npm packages installed from package-lock.json in $((SECONDS - start)) s"
fi

# --- build --------------------------------------------------------------------------------------------------
npm run --silent build || die "the build failed (tsc's errors above)"

# --- `berth` on the PATH ------------------------------------------------------------------------------------
# A symlink into this checkout: the CLI then always runs this tree's build. BERTH_BIN_DIR picks another place.
if [ -n "${BERTH_BIN_DIR:-}" ]; then
  bindir=$BERTH_BIN_DIR
elif [ "$(id -u)" = 0 ]; then
  bindir=/usr/local/bin
else
  bindir=$HOME/.local/bin
fi
mkdir -p "$bindir"
link=$bindir/berth
target=$repo/packages/cli/bin/berth.mjs
if [ "$(readlink "$link" 2>/dev/null)" != "$target" ]; then
  [ -e "$link" ] && [ ! -L "$link" ] && die "$link exists and is not a symlink: remove it, or set BERTH_BIN_DIR"
  [ -L "$link" ] && say "$link pointed at $(readlink "$link"); it now points at this checkout"
  ln -sfn "$target" "$link"
fi
case ":$PATH:" in
  *":$bindir:"*)
    found=$(command -v berth || true)
    [ "$found" = "$link" ] || say "another berth comes first on the PATH ($found): use $link"
    say "done: \`berth\` is $link; start the server with \`berth serve\`"
    ;;
  *)
    say "done: \`berth\` is $link, which is not on your PATH: echo 'export PATH=\"$bindir:\$PATH\"' >>~/.bashrc, then open a new shell"
    ;;
esac
