#!/usr/bin/env bash
# Install the Debian packages the test suite needs (PostgreSQL server, util-linux, iproute2, podman
# with its helpers for tests/backends/test_podman.py: runc, conmon, catatonit, busybox-static, ..., and Slurm with
# munge for the local training clusters: tests/slurm/test_slurm_daemons.py, scripts/slurm-local.sh, Chromium
# for the console's browser tests: tests/system/test_console_browser.py, and Node.js with npm for the official
# Node client: tests/system/test_node_client.py, whose packages the Makefile installs with `npm ci`).
#
# Idempotent and non-interactive: exits quickly when everything is already installed and only
# runs `apt-get update` when something actually has to be installed. Intended for root on a
# fresh Debian 12 machine (CI containers without systemd); falls back to sudo for non-root users.
# It never starts a service: the tests start their own throwaway PostgreSQL cluster
# (see tests/support/postgres.py) and their own munged/slurmctld/slurmd (src/trainworks/slurm/daemons.py).
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive

PACKAGES=(postgresql util-linux iproute2)
# Container runtime for `trainworks serve --container-runtime podman` (src/trainworks/backends/podman.py: runc,
# not crun, which refuses hybrid cgroups). tests/backends/test_podman.py builds its images from busybox-static.
PACKAGES+=(podman runc conmon catatonit fuse-overlayfs slirp4netns uidmap containernetworking-plugins
    busybox-static)
# Slurm 22.05 (slurmctld, slurmd, client commands) and munge, run as plain per-cluster daemons, no systemd.
PACKAGES+=(slurm-wlm munge)
# Headless Chromium for the web console's browser tests (Playwright drives /usr/bin/chromium).
PACKAGES+=(chromium)
# Node.js and npm run the official Node.js client (tests/node). Asked for only when the commands are missing:
# a Node.js from elsewhere (NodeSource's bundles npm) would conflict with Debian's packages.
NODE_PACKAGES=(nodejs npm)

is_installed() {
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

have_server_binaries() {
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null \
        && compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null
}

have_container_binaries() {
    command -v podman >/dev/null && command -v runc >/dev/null && [[ -x /bin/busybox ]]
}

have_node_binaries() {
    command -v node >/dev/null && command -v npm >/dev/null
}

have_slurm_binaries() {
    # the daemons live in /usr/sbin, which is not on every user's PATH
    local cmd
    for cmd in slurmctld slurmd munged sbatch; do
        command -v "${cmd}" >/dev/null || [[ -x /usr/sbin/${cmd} ]] || return 1
    done
}

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! is_installed "$pkg"; then
        missing+=("$pkg")
    fi
done

if [[ ${#missing[@]} -eq 0 ]] && have_server_binaries && have_container_binaries && have_slurm_binaries \
    && [[ -x /usr/bin/chromium ]] && have_node_binaries; then
    echo "install-test-deps: all packages already installed (${PACKAGES[*]}, node and npm)"
    exit 0
fi
if [[ ${#missing[@]} -eq 0 ]]; then
    # Packages recorded as installed but binaries gone: reinstall the packages that provide them.
    have_server_binaries || missing+=(postgresql)
    have_container_binaries || missing+=(podman runc busybox-static)
    have_slurm_binaries || missing+=(slurm-wlm munge)
    [[ -x /usr/bin/chromium ]] || missing+=(chromium)
fi
have_node_binaries || missing+=("${NODE_PACKAGES[@]}")

SUDO=()
if [[ ${EUID} -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo --preserve-env=DEBIAN_FRONTEND)
    else
        echo "install-test-deps: must run as root (or with sudo available) to install: ${missing[*]}" >&2
        exit 1
    fi
fi

# Without systemd, package maintainer scripts start services through invoke-rc.d. Install a
# temporary policy-rc.d that forbids this (unless one already exists) so that no PostgreSQL
# server is left running after installation.
POLICY=/usr/sbin/policy-rc.d
created_policy=0
cleanup() {
    if [[ ${created_policy} -eq 1 ]]; then
        "${SUDO[@]}" rm -f "${POLICY}"
    fi
}
trap cleanup EXIT
if [[ ! -e ${POLICY} ]]; then
    printf '#!/bin/sh\n# temporary, created by install-test-deps.sh\nexit 101\n' | "${SUDO[@]}" tee "${POLICY}" >/dev/null
    "${SUDO[@]}" chmod 0755 "${POLICY}"
    created_policy=1
fi

echo "install-test-deps: installing ${missing[*]}"
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "${missing[@]}"

if ! have_server_binaries; then
    echo "install-test-deps: PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin" >&2
    exit 1
fi
if ! have_container_binaries; then
    echo "install-test-deps: podman, runc or /bin/busybox is missing after installation" >&2
    exit 1
fi
if ! have_slurm_binaries; then
    echo "install-test-deps: slurmctld, slurmd, munged or sbatch is missing after installation" >&2
    exit 1
fi
if [[ ! -x /usr/bin/chromium ]]; then
    echo "install-test-deps: /usr/bin/chromium is missing after installation" >&2
    exit 1
fi
if ! have_node_binaries; then
    echo "install-test-deps: node or npm is missing after installation" >&2
    exit 1
fi
echo "install-test-deps: done"
