# Shared by test/check.sh, test/demo.sh and bench/run.sh: install what is
# missing, build and install snowseq, and run commands as a user that
# PostgreSQL accepts (it refuses to run as root).

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PGBIN=$("$PG_CONFIG" --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
PACKAGES="postgresql-15 postgresql-client-15 postgresql-server-dev-15 libipc-run-perl
	libxxhash-dev libmurmurhash-dev libssl-dev faketime make gcc rsync"

if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi

# Install the Debian packages that are missing (needs root or sudo).
ensure_packages() {
	local missing=""
	for p in $PACKAGES "$@"; do
		dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		echo "installing:$missing"
		$SUDO apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
	fi
	PGBIN=$("$PG_CONFIG" --bindir)
}

# Build warning-free (-Werror) and install into the PostgreSQL tree.
build_and_install() {
	make -s PG_CONFIG="$PG_CONFIG" clean >/dev/null
	make -s PG_CONFIG="$PG_CONFIG" PG_CFLAGS=-Werror
	$SUDO make -s PG_CONFIG="$PG_CONFIG" install >/dev/null
}

# A copy of the tree the server user can write to, when started as root.
# Prints the directory to work in.
work_tree() {
	if [ "$(id -u)" = 0 ]; then
		local dir
		dir=$(mktemp -d /tmp/snowseq.XXXXXX)
		rsync -a --exclude .git ./ "$dir/"
		chown -R postgres:postgres "$dir"
		echo "$dir"
	else
		pwd
	fi
}

# Run a command as the server user: postgres when we are root.
as_server_user() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- env PATH="$PGBIN:$PATH" "$@"
	else
		env PATH="$PGBIN:$PATH" "$@"
	fi
}
