# Shared helpers of snowseq's TAP tests.
#
# Whatever a client received counts as issued: IDs are written by psql to
# files outside the server under test, and checked from there.
package SnowseqTest;

use strict;
use warnings;

use Exporter 'import';
use File::Temp ();
use IPC::Run ();
use POSIX ();
use Time::HiRes ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(snowseq_node start_faketime set_fake_offset seconds_to_next_unit wait_until id_clients
  wait_clients check_ids read_ids all_unique strictly_increasing max_of
  min_of segment_of server_log_since read_state_file script_clients
  read_lines extension_fingerprint compare_fingerprints
  shard_layout move_leftovers fdw_servers_sql batch_client pause_batch_clients
  resume_batch_clients shard_conf gene_sharded_items doc_sql_blocks);

my $LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

# A new cluster with snowseq preloaded.  Options:
#   node_id => N (default 1; undef leaves it unset), conf => [lines],
#   preload => 0 to leave shared_preload_libraries alone,
#   streaming => 1 for a primary that takes standbys ('logical' for a
#   publisher of logical replication),
#   faketime => file (start the postmaster under libfaketime),
#   start => 0 to leave it stopped, extension => 0 to skip CREATE EXTENSION,
#   install_path => another PostgreSQL installation (its bin/ and libraries),
#   initdb => [more initdb options],
#   init_at => a libfaketime time ('@2040-01-02 00:00:00') initdb runs at: the
#   system identifier is made from the time, so one made in 2038 or later has
#   its top bit set (negative in pg_control_system()).
# The cluster is UTF8 with the C locale whatever the environment says
# (without a locale initdb would make it SQL_ASCII).
sub snowseq_node
{
	my ($name, %o) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name,
		$o{install_path} ? (install_path => $o{install_path}) : ());
	{
		local %ENV = %ENV;
		@ENV{qw(LD_PRELOAD FAKETIME)} = ($LIBFAKETIME, $o{init_at}) if $o{init_at};
		# force_initdb (16 and later): a cluster of its own, not a copy of a
		# template whose system identifier would be the template's
		$node->init(allows_streaming => $o{streaming} // 0, $o{init_at} ? (force_initdb => 1) : (),
			extra => [ '--encoding=UTF8', '--locale=C', @{ $o{initdb} || [] } ]);
	}
	my $conf = '';
	$conf .= "shared_preload_libraries = 'snowseq'\n" unless defined $o{preload} && !$o{preload};
	my $id = exists $o{node_id} ? $o{node_id} : 1;
	$conf .= "snowseq.node_id = $id\n" if defined $id;
	$conf .= "$_\n" for @{ $o{conf} || [] };
	$node->append_conf('postgresql.conf', $conf);
	return $node if defined $o{start} && !$o{start};
	if ($o{faketime}) { start_faketime($node, $o{faketime}); }
	else { $node->start; }
	$node->safe_psql('postgres', 'CREATE EXTENSION snowseq')
	  unless defined $o{extension} && !$o{extension};
	return $node;
}

# Start a node with its postmaster (and so every backend) under libfaketime,
# reading the offset from $file at every clock call.
sub start_faketime
{
	my ($node, $file, %opts) = @_;
	set_fake_offset($file, '+0') unless -e $file;
	local $ENV{LD_PRELOAD} = $LIBFAKETIME;
	local $ENV{FAKETIME_TIMESTAMP_FILE} = $file;
	local $ENV{FAKETIME_NO_CACHE} = 1;
	local $ENV{FAKETIME_DONT_FAKE_MONOTONIC} = 1;
	$node->start(%opts);
}

# Set the offset libfaketime applies, e.g. '-10m', '+0', '-1h'.
sub set_fake_offset
{
	my ($file, $offset) = @_;
	open my $fh, '>', "$file.tmp" or die "cannot write $file: $!";
	print $fh "$offset\n";
	close $fh;
	rename "$file.tmp", $file or die "cannot rename $file: $!";
}

# Whole seconds from now (the real clock) to the start of the next time
# unit of $unit_ms (whole seconds) counted from the default epoch,
# 2025-01-01 00:00 UTC.  As a libfaketime offset, plus a second, it puts a
# server's wall clock just past a unit boundary: no unit ends for nearly a
# whole unit, so a test with long units owns every change of the time unit
# (it steps the offset) instead of racing the real clock.
sub seconds_to_next_unit
{
	my ($unit_ms) = @_;
	die "time unit $unit_ms ms is not whole seconds" if $unit_ms % 1000;
	my $unit = $unit_ms / 1000;
	my $since = Time::HiRes::time() - 1735689600;
	return POSIX::ceil((POSIX::floor($since / $unit) + 1) * $unit - $since);
}

# Poll until $cond->() is true (every 10 ms, up to the tests' default
# timeout, which PG_TEST_TIMEOUT_DEFAULT raises on a slow machine); returns
# whether it became true.  For conditions outside the server (files,
# processes); for the server's state use poll_query_until.
sub wait_until
{
	my ($cond) = @_;
	my $deadline = Time::HiRes::time() + $PostgreSQL::Test::Utils::timeout_default;
	until ($cond->())
	{
		return 0 if Time::HiRes::time() > $deadline;
		Time::HiRes::usleep(10_000);
	}
	return 1;
}

# Start $n psql clients, each running $sql, with the rows each received
# written to a file of its own.  Returns [ [harness, file], ... ].
sub id_clients
{
	my ($node, $n, $sql, $tag) = @_;
	my @c;
	for my $i (1 .. $n)
	{
		my $file = sprintf('%s/ids_%s_%d.txt', $PostgreSQL::Test::Utils::tmp_check, $tag // 'c', $i);
		my ($err) = ('');
		my $h = IPC::Run::start(
			[ 'psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-c', $sql ],
			'>', $file, '2>', \$err);
		push @c, [ $h, $file, \$err ];
	}
	return \@c;
}

# Start one client per script (a string of statements), each run by psql
# from a file, what it printed written to a file of its own.  Options:
# on_error_stop => 0 to go on after a failed statement.  Returns
# [ [harness, file, \$stderr], ... ], like id_clients.
sub script_clients
{
	my ($node, $tag, $scripts, %o) = @_;
	my $stop = defined $o{on_error_stop} ? $o{on_error_stop} : 1;
	my @c;
	for my $i (0 .. $#$scripts)
	{
		my $script = sprintf('%s/%s_%d.sql', $PostgreSQL::Test::Utils::tmp_check, $tag, $i);
		open my $fh, '>', $script or die "cannot write $script: $!";
		print $fh $scripts->[$i];
		close $fh;
		my $file = sprintf('%s/%s_%d.out', $PostgreSQL::Test::Utils::tmp_check, $tag, $i);
		my $err = '';
		my $h = IPC::Run::start(
			[ 'psql', '-X', '-At', '-q', '-v', "ON_ERROR_STOP=$stop", '-d', $node->connstr('postgres'),
			  '-f', $script ],
			'>', $file, '2>', \$err);
		push @c, [ $h, $file, \$err ];
	}
	return \@c;
}

# The settings of a server that moves copy from and to: logical decoding,
# slots and senders for a move and its way back, prepared transactions for
# the switch, and a walsender that gives up on a silent peer within 5 s.
sub shard_conf
{
	return ('wal_level = logical', 'max_replication_slots = 10', 'max_wal_senders = 10',
		'max_prepared_transactions = 10', 'wal_sender_timeout = 5s');
}

# A gene-sharded table "items" on $router: server sN (the postgres_fdw
# server of $nodes->{sN}) holds the genes $bounds->[N-1] = [first, last] in
# its table items_N, which the router's partition items_{N-1} reads and the
# routing map names; then $rows rows inserted through the router.
sub gene_sharded_items
{
	my ($router, $nodes, $bounds, $rows) = @_;
	my @servers = sort keys %$nodes;
	$nodes->{"s$_"}->safe_psql('postgres', "CREATE TABLE items_$_ (item_id bigint PRIMARY KEY, k text NOT NULL)")
	  for 1 .. @$bounds;
	my $sql = "CREATE EXTENSION postgres_fdw;\n" . fdw_servers_sql('postgres', map { [ $_, $nodes->{$_} ] } @servers)
	  . "CREATE TABLE items (item_id bigint NOT NULL, k text NOT NULL) PARTITION BY RANGE (item_id);\n";
	for my $i (0 .. $#$bounds)
	{
		my ($f, $l) = @{ $bounds->[$i] };
		my $to = $l == 32767 ? 'MAXVALUE' : ($l + 1) . '::bigint << 48';
		$sql .= "CREATE FOREIGN TABLE items_$i PARTITION OF items FOR VALUES FROM (${f}::bigint << 48) TO ($to) "
		  . "SERVER s" . ($i + 1) . " OPTIONS (table_name 'items_" . ($i + 1) . "');\n"
		  . "INSERT INTO snowseq_shard_map VALUES ($l, 's" . ($i + 1) . "');\n";
	}
	$router->safe_psql('postgres', $sql);
	is($router->safe_psql('postgres', qq{
		WITH i AS (INSERT INTO items (item_id, k) SELECT snowseq_gene_next('k' || g), 'k' || g
			FROM generate_series(1, $rows) g RETURNING 1) SELECT count(*) FROM i}), $rows, "router: $rows rows to begin with");
}

# A client that has psql run a batch file ($o{batch}) again and again until
# $o{stop} exists (or its directory is gone), what psql printed appended to
# $o{out} and its errors to $o{err}; after a failed batch it waits
# $o{retry_sleep} seconds (default 0.2).  With $o{gen} (a Perl one-liner)
# each round first writes a fresh batch: perl -e GEN KEY BATCH, KEY being
# $o{key}.  While $o{pause} exists it runs nothing: see
# pause_batch_clients.  Returns { h => harness, out, err, answer }.
sub batch_client
{
	my ($node, %o) = @_;
	my $answer = "$o{out}.paused";
	unlink $o{out}, $o{err}, $answer, "$answer.new";
	# A pause is answered only at the top of the loop, between two batches:
	# the client copies the pause's token into its answer file.  A batch
	# begins only after the pause file was found absent, so once a client
	# has answered a pause's token it runs nothing until that pause ends.
	my $script = q{
		while [ ! -e "$3" ] && [ -d "${3%/*}" ]; do
			if [ -e "$4" ]; then
				cat "$4" > "$7.new" 2>/dev/null && mv -f "$7.new" "$7"
				sleep 0.05
				continue
			fi
			[ -n "$9" ] && perl -e "$9" "$8" "$2"
			psql -X -Atq -d "$1" -f "$2" >> "$5" 2>> "$6" || sleep "${10}"
		done
	};
	my $h = IPC::Run::start([ 'bash', '-c', $script, 'client', $node->connstr('postgres'), $o{batch},
		$o{stop}, $o{pause}, $o{out}, $o{err}, $answer, $o{key} // '', $o{gen} // '', $o{retry_sleep} // 0.2 ]);
	return { h => $h, out => $o{out}, err => $o{err}, answer => $answer };
}

# Pause the clients of batch_client that share the pause file $pause, each
# between two batches; returns once every one has answered this pause (a
# token of its own: an answer left from an earlier pause does not count),
# or dies.
my $pause_count = 0;
sub pause_batch_clients
{
	my ($pause, @clients) = @_;
	my $token = sprintf('%d.%d', $$, ++$pause_count);
	open my $fh, '>', "$pause.new" or die "cannot write $pause.new: $!";
	print $fh $token;
	close $fh;
	rename "$pause.new", $pause or die "cannot rename $pause.new: $!";
	my $answered = sub {
		open my $a, '<', $_[0] or return 0;
		my $got = <$a>;
		return defined $got && $got eq $token;
	};
	wait_until(sub { !grep { !$answered->($_->{answer}) } @clients }) or die 'clients did not pause';
}

# Let them run again.
sub resume_batch_clients { unlink $_[0]; }

# The complete lines of a file that match $re (every non-empty line without
# one): a client killed while printing leaves a torn last line, which it
# never received whole.
sub read_lines
{
	my ($file, $re) = @_;
	open my $fh, '<', $file or return ();
	my @l;
	while (my $l = <$fh>)
	{
		last unless $l =~ /\n\z/;
		chomp $l;
		push @l, $l if length($l) && (!defined $re || $l =~ $re);
	}
	return @l;
}

# Wait for clients; returns the number that failed (expected after a crash).
sub wait_clients
{
	my ($clients) = @_;
	my $failed = 0;
	for my $c (@$clients)
	{
		eval { $c->[0]->finish; 1 } or $failed++;
		$failed++ if $c->[0]->result(0);
	}
	return $failed;
}

# Read the IDs of a file (the complete lines only: a client killed while
# printing may leave a torn last line, which it never received whole).
sub read_ids
{
	return read_lines($_[0], qr/^\d+$/);
}

sub strictly_increasing
{
	my ($ids) = @_;
	for my $i (1 .. $#$ids)
	{
		return 0 unless $ids->[$i] > $ids->[ $i - 1 ];
	}
	return 1;
}

sub all_unique
{
	my ($ids) = @_;
	my %seen;
	for (@$ids)
	{
		return 0 if $seen{$_}++;
	}
	return 1;
}

sub max_of
{
	my $m = 0;
	for (@_) { $m = $_ if $_ > $m; }
	return $m;
}

sub min_of
{
	my $m;
	for (@_) { $m = $_ if !defined $m || $_ < $m; }
	return $m;
}

# The segment of a gene ID: its low 48 bits (counter << node_bits | node).
sub segment_of
{
	return $_[0] & ((1 << 48) - 1);
}

# Check every client's IDs: positive, strictly increasing within each
# client, unique across all.  Returns the union.
sub check_ids
{
	my ($clients, $what) = @_;
	my @all;
	my $inc = 1;
	for my $c (@$clients)
	{
		my @ids = read_ids($c->[1]);
		$inc = 0 unless strictly_increasing(\@ids);
		push @all, @ids;
	}
	ok($inc, "$what: each session's IDs strictly increase");
	ok(all_unique(\@all), "$what: no duplicate among " . scalar(@all) . " IDs");
	ok(!(grep { $_ <= 0 } @all), "$what: every ID is positive");
	return \@all;
}

# A state file (version 2) as a hash: node_id, layout ("t/n/s\@unit"),
# epoch_ms, clock, segment, backfill and wide_segment (their bounds), and
# counters (name => bound);
# undef when the file is missing or not a snowseq state file.  Layout:
# magic, version, the configuration (six int32, an int64 epoch), the number
# of reservations, then per reservation its tag, database, name (64 bytes),
# bound, block and margin, then a CRC-32C.
sub read_state_file
{
	my ($file) = @_;
	open my $fh, '<:raw', $file or return undef;
	local $/;
	my $buf = <$fh>;
	close $fh;
	return undef unless defined $buf && length($buf) >= 48;
	my ($magic, $version, $node_id, $tb, $nb, $sb, $unit, $pad, $epoch, $nslots) =
	  unpack('L< L< l< l< l< l< l< l< q< L<', $buf);
	return undef unless $magic == 0x53455153 && $version == 2;
	my %s = (node_id => $node_id, layout => "$tb/$nb/$sb\@$unit", epoch_ms => $epoch, counters => {});
	for my $i (0 .. $nslots - 1)
	{
		my ($tag, $db, $name, $bound, $block, $margin) =
		  unpack('L< L< Z64 Q< Q< Q<', substr($buf, 48 + 96 * $i, 96));
		if ($tag == 1) { $s{clock} = $bound; }
		elsif ($tag == 2) { $s{segment} = $bound; }
		elsif ($tag == 4) { $s{backfill} = $bound; }
		elsif ($tag == 5) { $s{wide_segment} = $bound; }
		else { $s{counters}{$name} = $bound; }
	}
	return \%s;
}

# The server log written after byte offset $from.
sub server_log_since
{
	my ($node, $from) = @_;
	return substr(slurp_file($node->logfile), $from // 0);
}

# The catalog of an extension as sorted lines, one fact a line, for
# comparing an upgraded installation with a fresh one (or one cluster before
# and after pg_upgrade).  Every member object of the extension, whatever
# its kind, by its identity; and in detail: functions (signature, result,
# language, markings, C library and symbol or normalized body, settings),
# operators, types, relations (kind, columns, defaults, constraints,
# indexes, triggers with their enabled state, policies, view definitions),
# privileges (ACLs and initial privileges, the owner written OWNER),
# comments (of members, their columns, constraints and triggers), and the
# extension's own row (version, configuration tables and their filters).
# Nothing depends on OIDs or on the order in which objects were created.
my $FINGERPRINT_SQL = <<'EOS';
SET search_path = pg_catalog;
WITH ext AS (
	SELECT * FROM pg_extension WHERE extname = :'ext'
), mem AS (
	SELECT d.classid, d.objid, d.objsubid
	FROM pg_depend d JOIN ext ON d.refobjid = ext.oid
	WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
), fn AS (
	SELECT p.* FROM pg_proc p JOIN mem ON mem.classid = 'pg_proc'::regclass AND mem.objid = p.oid
), rel AS (
	SELECT c.* FROM pg_class c JOIN mem ON mem.classid = 'pg_class'::regclass AND mem.objid = c.oid
), typ AS (
	SELECT t.* FROM pg_type t JOIN mem ON mem.classid = 'pg_type'::regclass AND mem.objid = t.oid
), ws(re) AS (
	VALUES ('[[:space:]]+')
), acl(what, owner, kind, acl) AS (
	SELECT 'function ' || oid::regprocedure, proowner, 'f', proacl FROM fn
	UNION ALL
	SELECT 'relation ' || oid::regclass, relowner, CASE relkind WHEN 'S' THEN 's' ELSE 'r' END, relacl FROM rel
	UNION ALL
	SELECT 'type ' || oid::regtype, typowner, 'T', typacl FROM typ
	UNION ALL
	SELECT 'schema ' || n.nspname, n.nspowner, 'n', n.nspacl
	FROM pg_namespace n JOIN mem ON mem.classid = 'pg_namespace'::regclass AND mem.objid = n.oid
)
SELECT line FROM (
	SELECT 'extension version=' || extversion || ' relocatable=' || extrelocatable
		|| ' schema=' || extnamespace::regnamespace FROM ext
	UNION ALL
	SELECT 'extension config ' || c::regclass || ' filter=' || coalesce(ext.extcondition[i], '')
	FROM ext, unnest(ext.extconfig) WITH ORDINALITY AS u(c, i)
	UNION ALL
	SELECT 'member ' || o.type || ' ' || o.identity
	FROM mem, pg_identify_object(mem.classid, mem.objid, mem.objsubid) o
	UNION ALL
	-- functions: one line per property, so a difference names it
	SELECT 'function ' || p.oid::regprocedure || ' ' || a
	FROM fn p JOIN pg_language l ON l.oid = p.prolang, ws,
	LATERAL unnest(ARRAY[
		'kind=' || p.prokind::text,
		'arguments=' || pg_get_function_arguments(p.oid),
		'result=' || coalesce(pg_get_function_result(p.oid), ''),
		'language=' || l.lanname,
		'volatility=' || p.provolatile::text,
		'strict=' || p.proisstrict,
		'parallel=' || p.proparallel::text,
		'security_definer=' || p.prosecdef,
		'leakproof=' || p.proleakproof,
		'cost=' || p.procost,
		'rows=' || p.prorows,
		'support=' || p.prosupport::regproc,
		'config=' || coalesce(array_to_string(p.proconfig, ','), ''),
		'library=' || coalesce(p.probin, ''),
		-- the C symbol, or the body of any other language
		'source=' || regexp_replace(btrim(p.prosrc), ws.re, ' ', 'g'),
		'sql_body=' || coalesce(regexp_replace(pg_get_function_sqlbody(p.oid), ws.re, ' ', 'g'), '')
	]) a
	UNION ALL
	SELECT 'aggregate ' || a.aggfnoid::regprocedure || ' transition=' || a.aggtransfn::regproc
		|| ' final=' || a.aggfinalfn::regproc || ' combine=' || a.aggcombinefn::regproc
		|| ' state=' || format_type(a.aggtranstype, NULL) || ' initial=' || coalesce(a.agginitval, '')
	FROM pg_aggregate a JOIN fn ON fn.oid = a.aggfnoid
	UNION ALL
	SELECT 'operator ' || o.oid::regoperator || ' function=' || o.oprcode::regprocedure
		|| ' result=' || o.oprresult::regtype
		|| ' commutator=' || CASE WHEN o.oprcom = 0 THEN '-' ELSE o.oprcom::regoperator::text END
		|| ' negator=' || CASE WHEN o.oprnegate = 0 THEN '-' ELSE o.oprnegate::regoperator::text END
		|| ' restrict=' || o.oprrest::regproc || ' join=' || o.oprjoin::regproc
		|| ' merges=' || o.oprcanmerge || ' hashes=' || o.oprcanhash
	FROM pg_operator o JOIN mem ON mem.classid = 'pg_operator'::regclass AND mem.objid = o.oid
	UNION ALL
	SELECT 'type ' || t.oid::regtype || ' type=' || t.typtype::text || ' category=' || t.typcategory::text
		|| ' base=' || CASE WHEN t.typbasetype = 0 THEN '-' ELSE format_type(t.typbasetype, t.typtypmod) END
		|| ' notnull=' || t.typnotnull || ' default=' || coalesce(t.typdefault, '')
		|| ' input=' || t.typinput::regproc || ' output=' || t.typoutput::regproc
		|| ' length=' || t.typlen || ' align=' || t.typalign::text || ' storage=' || t.typstorage::text
	FROM typ t
	UNION ALL
	SELECT 'type ' || e.enumtypid::regtype || ' label ' || row_number() OVER w || '=' || e.enumlabel
	FROM pg_enum e JOIN typ ON typ.oid = e.enumtypid
	WINDOW w AS (PARTITION BY e.enumtypid ORDER BY e.enumsortorder)
	UNION ALL
	-- relations: tables, views, sequences, and the composite types' columns
	SELECT 'relation ' || c.oid::regclass || ' kind=' || c.relkind::text || ' persistence=' || c.relpersistence::text
		|| ' options=' || coalesce(array_to_string(c.reloptions, ','), '')
		|| ' row_security=' || c.relrowsecurity || '/' || c.relforcerowsecurity
		|| ' replica_identity=' || c.relreplident::text
	FROM rel c
	UNION ALL
	SELECT 'relation ' || c.oid::regclass || ' view=' || regexp_replace(pg_get_viewdef(c.oid), ws.re, ' ', 'g')
	FROM rel c, ws WHERE c.relkind IN ('v', 'm')
	UNION ALL
	SELECT 'relation ' || s.seqrelid::regclass || ' sequence=' || format_type(s.seqtypid, NULL)
		|| ' ' || s.seqstart || ' ' || s.seqincrement || ' ' || s.seqmin || ' ' || s.seqmax
		|| ' cache=' || s.seqcache || ' cycle=' || s.seqcycle
	FROM pg_sequence s JOIN rel ON rel.oid = s.seqrelid
	UNION ALL
	SELECT 'column ' || a.attrelid::regclass || '.' || a.attname
		|| ' position=' || row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum)
		|| ' type=' || format_type(a.atttypid, a.atttypmod) || ' notnull=' || a.attnotnull
		|| ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
		|| ' identity=' || a.attidentity::text || ' generated=' || a.attgenerated::text
		|| ' collation=' || CASE WHEN a.attcollation = 0 THEN '-' ELSE a.attcollation::regcollation::text END
	FROM pg_attribute a
	JOIN pg_class c ON c.oid = a.attrelid
	LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
	WHERE a.attnum > 0 AND NOT a.attisdropped
	  AND (c.oid IN (SELECT oid FROM rel) OR c.reltype IN (SELECT oid FROM typ))
	UNION ALL
	SELECT 'constraint ' || coalesce(co.conrelid::regclass::text, co.contypid::regtype::text)
		|| ' ' || co.conname || ' ' || pg_get_constraintdef(co.oid)
		|| ' deferrable=' || co.condeferrable || '/' || co.condeferred || ' valid=' || co.convalidated
	FROM pg_constraint co
	WHERE co.conrelid IN (SELECT oid FROM rel) OR co.contypid IN (SELECT oid FROM typ)
	UNION ALL
	SELECT 'index ' || i.indrelid::regclass || ' ' || pg_get_indexdef(i.indexrelid)
	FROM pg_index i WHERE i.indrelid IN (SELECT oid FROM rel)
	UNION ALL
	SELECT 'trigger ' || t.tgrelid::regclass || ' ' || t.tgname || ' enabled=' || t.tgenabled::text
		|| ' ' || pg_get_triggerdef(t.oid)
	FROM pg_trigger t WHERE t.tgrelid IN (SELECT oid FROM rel) AND NOT t.tgisinternal
	UNION ALL
	SELECT 'rule ' || r.ev_class::regclass || ' ' || r.rulename || ' ' || pg_get_ruledef(r.oid)
	FROM pg_rewrite r WHERE r.ev_class IN (SELECT oid FROM rel) AND r.rulename <> '_RETURN'
	UNION ALL
	SELECT 'policy ' || p.polrelid::regclass || ' ' || p.polname || ' command=' || p.polcmd::text
		|| ' permissive=' || p.polpermissive
		|| ' roles=' || (SELECT string_agg(CASE WHEN r = 0 THEN 'PUBLIC' ELSE r::regrole::text END, ',' ORDER BY 1) FROM unnest(p.polroles) r)
		|| ' using=' || coalesce(pg_get_expr(p.polqual, p.polrelid), '')
		|| ' check=' || coalesce(pg_get_expr(p.polwithcheck, p.polrelid), '')
	FROM pg_policy p WHERE p.polrelid IN (SELECT oid FROM rel)
	UNION ALL
	-- privileges: NULL is the default for the kind, the owner is OWNER
	SELECT 'privilege ' || acl.what || ' '
		|| CASE WHEN x.grantee = 0 THEN 'PUBLIC' WHEN x.grantee = acl.owner THEN 'OWNER' ELSE x.grantee::regrole::text END
		|| ' ' || x.privilege_type || CASE WHEN x.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END
		|| ' by ' || CASE WHEN x.grantor = acl.owner THEN 'OWNER' ELSE x.grantor::regrole::text END
	FROM acl, aclexplode(coalesce(acl.acl, acldefault(acl.kind::"char", acl.owner))) x
	UNION ALL
	SELECT 'privilege column ' || c.oid::regclass || '.' || a.attname || ' '
		|| CASE WHEN x.grantee = 0 THEN 'PUBLIC' WHEN x.grantee = c.relowner THEN 'OWNER' ELSE x.grantee::regrole::text END
		|| ' ' || x.privilege_type
	FROM rel c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attacl IS NOT NULL, aclexplode(a.attacl) x
	UNION ALL
	-- what pg_dump takes as the extension's own privileges
	SELECT 'initial privilege ' || o.type || ' ' || o.identity || ' ' || ip.privtype::text || ' '
		|| CASE WHEN x.grantee = 0 THEN 'PUBLIC' WHEN x.grantee = x.grantor THEN 'OWNER' ELSE x.grantee::regrole::text END
		|| ' ' || x.privilege_type
	FROM pg_init_privs ip
	JOIN mem ON mem.classid = ip.classoid AND mem.objid = ip.objoid,
	pg_identify_object(ip.classoid, ip.objoid, ip.objsubid) o, aclexplode(ip.initprivs) x
	-- initial privileges equal to the built-in default mean the same as
	-- none (REVOKE ALL ON a table FROM PUBLIC records them; pg_upgrade,
	-- through pg_dump, has nothing to restore and records none)
	WHERE NOT EXISTS (SELECT 1 FROM pg_class c
					  WHERE ip.classoid = 'pg_class'::regclass AND ip.objsubid = 0 AND c.oid = ip.objoid
						AND ip.initprivs = acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char", c.relowner))
	  AND NOT EXISTS (SELECT 1 FROM pg_proc p
					  WHERE ip.classoid = 'pg_proc'::regclass AND p.oid = ip.objoid
						AND ip.initprivs = acldefault('f'::"char", p.proowner))
	UNION ALL
	-- comments of the members and of their parts
	SELECT 'comment ' || o.type || ' ' || o.identity || ' = ' || d.description
	FROM pg_description d, pg_identify_object(d.classoid, d.objoid, d.objsubid) o
	WHERE (d.classoid, d.objoid) IN (SELECT classid, objid FROM mem)
	   OR (d.classoid = 'pg_trigger'::regclass
		   AND d.objoid IN (SELECT oid FROM pg_trigger WHERE tgrelid IN (SELECT oid FROM rel)))
	   OR (d.classoid = 'pg_constraint'::regclass
		   AND d.objoid IN (SELECT oid FROM pg_constraint WHERE conrelid IN (SELECT oid FROM rel)))
) lines(line)
ORDER BY line COLLATE "C";
EOS

sub extension_fingerprint
{
	my ($node, $db, $ext) = @_;
	my $out = $node->safe_psql($db, $FINGERPRINT_SQL, extra_params => [ '-v', 'ext=' . ($ext // 'snowseq') ]);
	return [ split /\n/, $out ];
}

# Compare two fingerprints; on a difference, print the lines only one of
# them has.  Returns true when they are equal.
sub compare_fingerprints
{
	my ($have, $want, $what, $have_name, $want_name) = @_;
	my %count;
	$count{$_}++ for @$have;
	$count{$_}-- for @$want;
	my @only_have = grep { $count{$_} > 0 } sort keys %count;
	my @only_want = grep { $count{$_} < 0 } sort keys %count;
	my $ok = ok(!@only_have && !@only_want, "$what (" . scalar(@$want) . " catalog lines)");
	unless ($ok)
	{
		diag("only in $have_name: $_") for @only_have;
		diag("only in $want_name: $_") for @only_want;
	}
	return $ok;
}

# The ```sql blocks of a page's text: [first line, sql, marker], in the
# order of the page.  The marker is the HTML comment on the last non-empty
# line before a block, <!-- word: text -->, as [word, text] (undef when
# there is none): "shards" marks a block that runs on a router with shard
# servers (test/t/066_docs_shards.pl), the text naming where.
sub doc_sql_blocks
{
	my ($text) = @_;
	my @lines = split /\n/, $text, -1;
	my ($prev, @blocks) = ('');
	for (my $i = 0; $i < @lines; $i++)
	{
		my $line = $lines[$i];
		if ($line =~ /^```sql\s*$/)
		{
			my @marker = $prev =~ /^<!--\s*([\w-]+):\s*(.*?)\s*-->\s*$/;
			my $start = $i + 1;
			my @sql;
			for ($i++; $i < @lines && $lines[$i] !~ /^```\s*$/; $i++)
			{
				push @sql, $lines[$i];
			}
			push @blocks, [ $start, join("\n", @sql) . "\n", @marker ? \@marker : undef ];
		}
		elsif ($line =~ /^```/)
		{
			# another fence: skip to its end
			for ($i++; $i < @lines && $lines[$i] !~ /^```\s*$/; $i++) { }
		}
		$prev = $line if $line =~ /\S/;
	}
	return @blocks;
}

# SQL for a router: a postgres_fdw server and a user mapping for the
# current user for each [name, node] given, reaching database $db there.
sub fdw_servers_sql
{
	my ($db, @servers) = @_;
	return join '', map {
		sprintf("CREATE SERVER %s FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '%s', port '%s', dbname '%s');\n"
			  . "CREATE USER MAPPING FOR CURRENT_USER SERVER %s;\n", $_->[0], $_->[1]->host, $_->[1]->port, $db, $_->[0])
	} @servers;
}

# The routing map of a router's database and the partitions of some of its
# gene-sharded tables, as one line: "upper_gene=shard,..." then each
# partition, its bounds and the server and remote table it reads.
sub shard_layout
{
	my ($router, $db, @parents) = @_;
	my $in = join(', ', map { "'$_'::regclass" } @parents);
	return $router->safe_psql($db, q{
		SELECT string_agg(upper_gene || '=' || shard, ',' ORDER BY upper_gene) FROM snowseq_shard_map})
	  . ' ' . $router->safe_psql($db, qq{
		SELECT string_agg(c.relname || ' ' || pg_get_expr(c.relpartbound, c.oid) || ' ' || s.srvname || '.'
			|| coalesce((SELECT option_value FROM pg_options_to_table(ft.ftoptions) WHERE option_name = 'table_name'),
				c.relname), '; ' ORDER BY c.relname)
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		JOIN pg_foreign_table ft ON ft.ftrelid = c.oid JOIN pg_foreign_server s ON s.oid = ft.ftserver
		WHERE i.inhparent IN ($in)});
}

# What moves left on shard servers (database $db): replication slots,
# publications, subscriptions, fences other than tombstones; "node: what",
# one per object.
sub move_leftovers
{
	my ($db, @nodes) = @_;
	my @l;
	for my $s (@nodes)
	{
		push @l, map { $s->name . ": $_" } grep { length } split /\n/, $s->safe_psql($db, q{
			SELECT 'slot ' || slot_name FROM pg_replication_slots
			UNION ALL SELECT 'publication ' || pubname FROM pg_publication
			UNION ALL SELECT 'subscription ' || subname FROM pg_subscription
			UNION ALL SELECT 'fence ' || token || ' ' || state FROM snowseq_fence WHERE state <> 'moved'});
	}
	return @l;
}

1;
