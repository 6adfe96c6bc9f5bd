# Shared by test/check.sh, test/demo.sh and the benchmarks (bench/*.sh):
# install what is missing, build and install snowseq, run commands as a user
# that PostgreSQL accepts (it refuses to run as root), and start and stop
# throwaway clusters.

# The PostgreSQL major version: PG_MAJOR, else the one PG_CONFIG names,
# else 15 (Debian 12's).  test/matrix.sh sets PG_CONFIG inside its chroots.
if [ -z "${PG_MAJOR:-}" ] && [ -n "${PG_CONFIG:-}" ]; then
	PG_MAJOR=$("$PG_CONFIG" --version 2>/dev/null | sed -n 's/^PostgreSQL \([0-9]*\).*/\1/p')
	# not installed yet: Debian's path names the version
	[ -n "$PG_MAJOR" ] ||
		PG_MAJOR=$(echo "$PG_CONFIG" | sed -n 's|.*/postgresql/\([0-9]*\)/bin/pg_config$|\1|p')
fi
PG_MAJOR=${PG_MAJOR:-15}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/$PG_MAJOR/bin/pg_config}
PGBIN=$("$PG_CONFIG" --bindir 2>/dev/null || echo "/usr/lib/postgresql/$PG_MAJOR/bin")
PACKAGES="postgresql-$PG_MAJOR postgresql-client-$PG_MAJOR postgresql-server-dev-$PG_MAJOR
	libipc-run-perl libxxhash-dev libmurmurhash-dev libssl-dev faketime make gcc rsync"
# What the whole suite needs besides: the benchmark harness (bench/run.sh
# --smoke), the clients whose guides under docs/clients/ run in
# test/t/081_clients.pl, the ORMs of test/t/082_orms.pl (Django, Active
# Record; node-postgres and Knex come from the npm registry,
# test/clients/package.json), and Prometheus's PostgreSQL exporter and
# promtool for test/t/080_monitoring.pl.  test/check.sh installs all of it
# up front.
TEST_PACKAGES="gnuplot-nox python3 python3-psycopg python3-psycopg2 python3-sqlalchemy
	python3-xxhash nodejs npm default-jdk-headless libpostgresql-jdbc-java libguava-java
	liblz4-java prometheus-postgres-exporter prometheus python3-django ruby-activerecord ruby-pg"

if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi

# Install those of the named Debian packages that are missing (needs root
# or sudo).  Node.js and npm count as there when their programs are, from
# wherever they came: Node.js from its makers' repository ships npm too,
# and conflicts with Debian's npm package.
install_missing() {
	local missing="" cmd
	for p in "$@"; do
		case "$p" in
			nodejs) cmd=node ;;
			npm) cmd=npm ;;
			*) cmd="" ;;
		esac
		[ -n "$cmd" ] && command -v "$cmd" >/dev/null 2>&1 && continue
		dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		echo "installing:$missing"
		# apt's chatter (debconf's notes) only when it fails
		local log
		log=$(mktemp "${TMPDIR:-/tmp}/snowseq-apt.XXXXXX")
		if ! { $SUDO apt-get update -qq &&
			$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing; } >"$log" 2>&1; then
			cat "$log"
			rm -f "$log"
			echo "installing:$missing failed" >&2
			return 1
		fi
		rm -f "$log"
	fi
}

# Install what building and testing snowseq needs, and the named extras.
ensure_packages() {
	install_missing $PACKAGES "$@"
	PGBIN=$("$PG_CONFIG" --bindir)
}

# The npm modules of the node-postgres examples (test/clients/package.json,
# versions fixed by its package-lock.json), installed into
# test/clients/node_modules (ignored by git) when missing or out of date.
client_modules() {
	[ -f test/clients/package-lock.json ] || return 0
	[ test/clients/node_modules/.package-lock.json -nt test/clients/package-lock.json ] && return 0
	echo "installing the npm modules of test/clients (npm ci)"
	(cd test/clients && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}

# Build warning-free (-Werror) and install into the PostgreSQL tree; with
# SNOWSEQ_DEBUG set, the test build whose Assert()s are checked.
build_and_install() {
	make -s PG_CONFIG="$PG_CONFIG" clean >/dev/null
	make -s PG_CONFIG="$PG_CONFIG" PG_CFLAGS=-Werror ${SNOWSEQ_DEBUG:+SNOWSEQ_DEBUG=1}
	$SUDO make -s PG_CONFIG="$PG_CONFIG" install >/dev/null
}

# Build and install into the PostgreSQL that pg_config $1 names, in a copy
# of the tree (the tree's own build, for PG_CONFIG, stays as it is).
build_and_install_elsewhere() {
	local pgc=$1 dir

	dir=$(mktemp -d /tmp/snowseq-build.XXXXXX)
	rsync -a --exclude=.git --filter=':- .gitignore' ./ "$dir/"
	echo "building snowseq for $("$pgc" --version)"
	(cd "$dir" && make -s PG_CONFIG="$pgc" PG_CFLAGS=-Werror &&
		$SUDO make -s PG_CONFIG="$pgc" install >/dev/null)
	rm -rf "$dir"
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

# Run a command as the server user: postgres when we are root, from the
# root directory when postgres cannot enter the current one (PostgreSQL's
# programs complain that they cannot change back to it).
as_server_user() {
	if [ "$(id -u)" = 0 ]; then
		local wd=.
		runuser -u postgres -- test -x "$PWD" 2>/dev/null || wd=/
		(cd "$wd" && runuser -u postgres -- env PATH="$PGBIN:$PATH" "$@")
	else
		env PATH="$PGBIN:$PATH" "$@"
	fi
}

# Throwaway clusters with snowseq preloaded, for the benchmarks: each one in
# DIR/NAME, with its socket in DIR (no TCP) and its log in DIR/NAME.log.
# start_cluster DIR NAME PORT makes one and starts it, adding the settings
# on standard input to its postgresql.conf.
start_cluster() {
	local dir=$1 name=$2 port=$3

	as_server_user initdb -D "$dir/$name" -U postgres -E UTF8 --locale=C -A trust --no-sync \
		>"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log"; return 1; }
	{
		printf "\nlisten_addresses = ''\nunix_socket_directories = '%s'\nport = %d\n" "$dir" "$port"
		printf "shared_preload_libraries = 'snowseq'\n"
		cat
	} >>"$dir/$name/postgresql.conf"
	as_server_user pg_ctl -D "$dir/$name" -l "$dir/$name.log" -w -t 60 start >/dev/null
}

# stop_clusters RC DIR NAME...: stop the clusters that run (immediate: they
# are thrown away), and when RC (the exit status) says something failed,
# show the end of each one's log.
stop_clusters() {
	local rc=$1 dir=$2 name

	shift 2
	for name in "$@"; do
		if [ -f "$dir/$name/postmaster.pid" ]; then
			as_server_user pg_ctl -D "$dir/$name" -m immediate -w stop >/dev/null 2>&1 || true
		fi
	done
	[ "$rc" -eq 0 ] && return 0
	for name in "$@"; do
		[ -f "$dir/$name.log" ] && { echo "=== $name server log (tail)"; tail -n 30 "$dir/$name.log"; }
	done
	return 0
}
