# The actor matrix: every durable object of snowseq against every role or
# holder that could shape or read it (docs/security.md is this table in
# words).  Each cell is a check run here, as that actor, or the reason it
# cannot apply / the test that covers it; the table below is also the data
# that drives the test (%MATRIX: 'check' runs, any other text is a reason).
#
#                    | clock | counter | serial | key     | wrap | routing | move   | fence | status
#                    |       | + floor |        | version | key  | map     | record |       |
# -------------------+-------+---------+--------+---------+------+---------+--------+-------+-------
# PUBLIC             | ck    | ck      | ck     | ck      | ck   | ck      | ck     | ck    | ck
# database owner     | ck    | ck      | = 1    | ck      | = 1  | ck      | = 1    | = 1   | ck
# CREATE on ext.     | = 1   | ck      | = 2    | = 1     | = 1  | = 1     | = 1    | = 1   | = 1
#   schema           |       |         |        |         |      |         |        |       |
# table grantee      | n/a 3 | ck      | = 2    | ck      | n/a 4| ck      | 5      | 5     | n/a 3
# function grantee   | ck    | ck      | = 2    | = 6     | = 6  | n/a 7   | 5      | 5     | n/a 8
# counter owner      | n/a 9 | ck      | = 2    | n/a 9   | n/a 9| n/a 9   | n/a 9  | n/a 9 | ck
# counter grantee    | n/a 9 | ck      | = 2    | n/a 9   | n/a 9| n/a 9   | n/a 9  | n/a 9 | ck
# key administrator  | n/a 9 | n/a 9   | n/a 9  | ck      | ck   | n/a 9   | n/a 9  | n/a 9 | n/a 9
# REPLICATION        | n/a 10| n/a 10  | n/a 10 | ck      | n/a 4| n/a 10  | n/a 10 | n/a 10| n/a 10
# pg_read_all_data   | n/a 3 | ck      | = 2    | ck      | n/a 4| ck      | ck     | ck    | n/a 3
# pg_read_server_    | n/a 11| n/a 11  | n/a 11 | n/a 11  | ck   | n/a 11  | n/a 11 | n/a 11| n/a 11
#   files            |       |         |        |         |      |         |        |       |
# pg_monitor         | ck    | ck      | = 2    | ck      | n/a 4| n/a 12  | 080    | 080   | ck
# holder of a dump   | 013   | 070     | 070    | 071     | 071  | 070     | n/a 13 | n/a 13| n/a 3
# holder of a        | n/a 14| n/a 14  | n/a 14 | 071     | ck   | n/a 14  | n/a 14 | n/a 14| n/a 14
#   keyring copy     |       |         |        |         |      |         |        |       |
#
# ck: checked here.  0NN: test/t/0NN_*.pl.  = N: as for the row's first
# actor's refusal, nothing more to try (1: as PUBLIC, whose checks it
# repeats for its own role where it differs; 2: a serial is a counter: the
# same floor, rights and table).  Notes: 3 nothing of that object is in a
# table; 4 wrap keys are in a file of the data directory, in no table and in
# no WAL record logical decoding decodes; 5 moves and fences: see the move
# tests (040, 041) and issue 30's records; the tables have no grant and a
# grant is an administrator's decision, as on any table; 6 the key
# functions are the key administrator's row; 7 the map's writers are its
# table grantees (a routing-map change is a grant, since 1.1); 8 status is
# for pg_monitor; 9 that role's rights reach that object only; 10 logical
# decoding shows row changes of tables: what rows of snowseq's tables show
# is pg_read_all_data's row; 11 reads files of the server: the keyring is
# its cell; 12 pg_monitor reads status, capacity and the moves' phases only; 13 a move's records are not
# dumped (they name replication objects of this cluster); 14 a keyring copy
# holds wrap keys, nothing else: its cell is the wrap key, 071 the versions.
#
# Besides the matrix, the events an operator and those roles can bring
# about that 1.2 got wrong (issue 26): a counter whose place was freed,
# created again after DROP/CREATE EXTENSION in another schema; a wrap key
# planted by import; imports that block, half-succeed or tell which files
# exist.
use strict;
use warnings;
use lib 'test';
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $tmp = $PostgreSQL::Test::Utils::tmp_check;
my @ACTORS = ('PUBLIC', 'database owner', 'CREATE on the extension schema', 'table grantee',
	'function grantee', 'counter owner', 'counter grantee', 'key administrator', 'REPLICATION',
	'pg_read_all_data', 'pg_read_server_files', 'pg_monitor', 'holder of a dump',
	'holder of a keyring copy');
my @OBJECTS = ('clock', 'counter', 'serial', 'key version', 'wrap key', 'routing map', 'move record',
	'fence', 'status');

my %R = (
	same => 'n/a: as for PUBLIC, nothing more to try',
	serial => 'n/a: a serial is a counter: the same floor, rights and table, checked in its counter cell',
	notable => 'n/a: nothing of that object is in a table',
	file => 'n/a: wrap keys are in a file of the data directory, in no table and in no WAL record logical decoding decodes',
	moves => 'covered: 040_move.pl and 041_move_safety.pl; the tables have no grant, and a grant is an administrator\'s decision',
	keyfn => 'n/a: the key functions are the key administrator\'s row',
	mapgrant => 'n/a: the map\'s writers are its table grantees: a routing-map change is a grant',
	statusfor => 'n/a: status is for pg_monitor',
	own => 'n/a: that role\'s rights reach that object only',
	decode => 'n/a: logical decoding shows row changes of tables: what snowseq\'s tables show is pg_read_all_data\'s row',
	files => 'n/a: it reads files of the server: the keyring is its cell',
	monitor => 'n/a: pg_monitor reads status, capacity and the phases of moves only',
	notdumped => 'n/a: a move\'s records and fences are not dumped: they name objects of this cluster',
	keyring => 'n/a: a keyring copy holds wrap keys and the version mark, nothing else',
);
my %MATRIX;
$MATRIX{'PUBLIC'}{$_} = 'check' for @OBJECTS;
$MATRIX{'database owner'} = { map { $_ => $R{same} } @OBJECTS };
$MATRIX{'database owner'}{$_} = 'check' for ('clock', 'counter', 'key version', 'routing map', 'status');
$MATRIX{'CREATE on the extension schema'} = { map { $_ => $R{same} } @OBJECTS };
$MATRIX{'CREATE on the extension schema'}{counter} = 'check';
$MATRIX{'table grantee'} = { clock => $R{notable}, counter => 'check', 'key version' => 'check',
	'wrap key' => $R{file}, 'routing map' => 'check', 'move record' => 'check', fence => 'check',
	status => $R{notable} };
$MATRIX{'function grantee'} = { clock => 'check', counter => 'check', 'key version' => $R{keyfn},
	'wrap key' => $R{keyfn}, 'routing map' => $R{mapgrant}, 'move record' => $R{moves},
	fence => $R{moves}, status => $R{statusfor} };
for my $a ('counter owner', 'counter grantee')
{
	$MATRIX{$a} = { map { $_ => $R{own} } @OBJECTS };
	$MATRIX{$a}{$_} = 'check' for ('counter', 'status');
}
$MATRIX{'key administrator'} = { map { $_ => $R{own} } @OBJECTS };
$MATRIX{'key administrator'}{$_} = 'check' for ('key version', 'wrap key');
$MATRIX{'REPLICATION'} = { map { $_ => $R{decode} } @OBJECTS };
$MATRIX{'REPLICATION'}{'key version'} = 'check';
$MATRIX{'REPLICATION'}{'wrap key'} = $R{file};
$MATRIX{'pg_read_all_data'} = { map { $_ => 'check' } @OBJECTS };
$MATRIX{'pg_read_all_data'}{$_} = $R{notable} for ('clock', 'status');
$MATRIX{'pg_read_all_data'}{'wrap key'} = $R{file};
$MATRIX{'pg_read_server_files'} = { map { $_ => $R{files} } @OBJECTS };
$MATRIX{'pg_read_server_files'}{'wrap key'} = 'check';
$MATRIX{'pg_monitor'} = { map { $_ => $R{monitor} } @OBJECTS };
$MATRIX{'pg_monitor'}{$_} = 'check' for ('clock', 'counter', 'key version', 'status');
$MATRIX{'pg_monitor'}{'wrap key'} = $R{file};
$MATRIX{'pg_monitor'}{'move record'} = 'covered: 080_monitoring.pl (the instants a move\'s phases began and its progress; no tokens, objects or errors)';
$MATRIX{'pg_monitor'}{'fence'} = 'covered: 080_monitoring.pl (refused)';
$MATRIX{'holder of a dump'} = {
	clock => 'covered: 013_dump.pl (a restored copy in another cluster issues above the source)',
	counter => 'covered: 070_lifecycle.pl (full and partial dumps, another cluster)',
	'key version' => 'covered: 071_lifecycle_keys.pl (other cluster; an older dump with the keyring)',
	'wrap key' => 'covered: 071_lifecycle_keys.pl (key rows stay wrapped until the keyring is imported)',
	'routing map' => 'covered: 070_lifecycle.pl',
	'move record' => $R{notdumped}, fence => $R{notdumped}, status => $R{notable} };
$MATRIX{'holder of a keyring copy'} = { map { $_ => $R{keyring} } @OBJECTS };
$MATRIX{'holder of a keyring copy'}{'wrap key'} = 'check';
$MATRIX{'holder of a keyring copy'}{'key version'} =
  'covered: 071_lifecycle_keys.pl (the version mark travels with the keyring)';
for my $a (@ACTORS)
{
	$MATRIX{$a}{serial} //= $R{serial};
	$MATRIX{$a}{serial} = $R{serial} unless $a eq 'PUBLIC';
}

# every cell is a check or a reason
for my $a (@ACTORS)
{
	for my $o (@OBJECTS)
	{
		my $c = $MATRIX{$a}{$o} // '';
		ok($c eq 'check' || $c =~ /^(n\/a|covered): ./, "matrix: $a x $o has a check or a reason");
	}
}

my %checked;

# Run sql as role in db; returns (exit code, stdout, stderr).
sub as_role
{
	my ($node, $db, $role, $sql) = @_;
	my ($out, $err) = ('', '');
	my $rc = $node->psql($db, "SET ROLE $role;\n$sql", stdout => \$out, stderr => \$err,
		on_error_stop => 1);
	return ($rc, $out, $err);
}

# A check of a cell: sql as the actor's role succeeds (and prints $want, if
# given) or fails with an error matching $want (a Regexp).
sub cell
{
	my ($node, $db, $actor, $object, $role, $what, $sql, $want) = @_;
	die "no cell $actor x $object to check" unless ($MATRIX{$actor}{$object} // '') eq 'check';
	$checked{"$actor x $object"}++;
	my ($rc, $out, $err) = as_role($node, $db, $role, $sql);
	if (ref $want eq 'Regexp')
	{
		like($err, $want, "$actor x $object: $what");
	}
	else
	{
		is($rc, 0, "$actor x $object: $what") or diag($err);
		is($out, $want, "$actor x $object: $what (result)") if defined $want;
	}
}

my $DENIED = qr/permission denied/;
my $node = snowseq_node('actors', node_id => 1, streaming => 'logical', conf => [ "timezone = 'UTC'" ]);
sub su { return $node->safe_psql(@_); }

su('postgres', q{
	CREATE ROLE regress_public;
	CREATE ROLE regress_dbowner;
	CREATE ROLE regress_creator;
	CREATE ROLE regress_tablegrant;
	CREATE ROLE regress_admin;
	CREATE ROLE regress_owner;
	CREATE ROLE regress_grantee;
	CREATE ROLE regress_keyadmin;
	CREATE ROLE regress_replication REPLICATION;
	CREATE ROLE regress_readall IN ROLE pg_read_all_data;
	CREATE ROLE regress_files IN ROLE pg_read_server_files;
	CREATE ROLE regress_monitor IN ROLE pg_monitor;
	CREATE DATABASE actors OWNER regress_dbowner;
});
# What an administrator grants each role.
su('actors', q{
	CREATE EXTENSION snowseq;
	GRANT CREATE ON SCHEMA public TO regress_creator;
	GRANT INSERT, UPDATE, DELETE ON snowseq_counters, snowseq_key_store, snowseq_shard_map
		TO regress_tablegrant;
	GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON snowseq_moves, snowseq_fence, snowseq_move_objects
		TO regress_tablegrant;
	GRANT EXECUTE ON FUNCTION snowseq_create_counter(text, bigint, integer, boolean, bigint),
		snowseq_create_serial(text, text, text, bigint, integer), snowseq_next_n(integer),
		snowseq_counter_next(text), snowseq_serial(text)
		TO regress_admin, regress_owner;
	GRANT EXECUTE ON FUNCTION snowseq_counter_next(text), snowseq_counter_raise(text, bigint)
		TO regress_grantee, regress_tablegrant, regress_monitor;
	GRANT EXECUTE ON FUNCTION snowseq_new_key(integer), snowseq_use_key(integer),
		snowseq_retire_key(integer), snowseq_import_wrap_keys(text), snowseq_encrypt(bigint)
		TO regress_keyadmin, regress_files;
	SET ROLE regress_owner;
	SELECT snowseq_create_counter('owned');
	SELECT snowseq_create_serial('owned_s', 'O-######');
	SELECT snowseq_counter_next('owned');
	SELECT snowseq_grant_counter('owned', 'regress_grantee');
	RESET ROLE;
	INSERT INTO snowseq_shard_map VALUES (32767, 'here');
	SELECT snowseq_use_key(snowseq_new_key());
});
my $floor = su('actors', q{SELECT 'snowseq_state.' || c.relname FROM pg_class c
	WHERE c.relnamespace = 'snowseq_state'::regnamespace
	  AND obj_description(c.oid, 'pg_class') = 'floor of snowseq counter "owned"'});
like($floor, qr/^snowseq_state\.snowseq_floor_[0-9a-f]{32}$/, 'the counter owned has its floor in snowseq_state');

# ---- PUBLIC: a role with no grant ----
my $p = 'regress_public';
cell($node, 'actors', 'PUBLIC', 'clock', $p, 'draws snowflake IDs (EXECUTE is PUBLIC\'s)',
	'SELECT snowseq_next() > 0', 't');
cell($node, 'actors', 'PUBLIC', 'clock', $p, 'takes no batch', 'SELECT snowseq_next_n(10)', $DENIED);
cell($node, 'actors', 'PUBLIC', 'clock', $p, 'resets no state', 'SELECT snowseq_reset_state()', $DENIED);
cell($node, 'actors', 'PUBLIC', 'counter', $p, 'draws from no counter',
	"SELECT snowseq_counter_next('owned')", $DENIED);
cell($node, 'actors', 'PUBLIC', 'counter', $p, 'creates no counter',
	"SELECT snowseq_create_counter('by_public')", $DENIED);
cell($node, 'actors', 'PUBLIC', 'counter', $p, 'drops no counter',
	"SELECT snowseq_drop_counter('owned')", qr/must be owner of counter "owned"/);
cell($node, 'actors', 'PUBLIC', 'counter', $p, 'reads no definition',
	'SELECT count(*) FROM snowseq_counters', $DENIED);
cell($node, 'actors', 'PUBLIC', 'counter', $p, 'sees no other role\'s counter in the view',
	'SELECT count(*) FROM snowseq_counter_status', '0');
cell($node, 'actors', 'PUBLIC', 'counter', $p, 'cannot move a floor',
	"SELECT nextval('$floor')", $DENIED);
cell($node, 'actors', 'PUBLIC', 'counter', $p, 'creates nothing in snowseq_state',
	'CREATE TABLE snowseq_state.planted (x int)', $DENIED);
cell($node, 'actors', 'PUBLIC', 'serial', $p, 'creates no serial',
	"SELECT snowseq_create_serial('by_public', 'P-#')", $DENIED);
cell($node, 'actors', 'PUBLIC', 'key version', $p, 'makes no key', 'SELECT snowseq_new_key()', $DENIED);
cell($node, 'actors', 'PUBLIC', 'key version', $p, 'reads no key', 'SELECT count(*) FROM snowseq_key_store', $DENIED);
cell($node, 'actors', 'PUBLIC', 'key version', $p, 'lists no key', 'SELECT count(*) FROM snowseq_keys', $DENIED);
cell($node, 'actors', 'PUBLIC', 'wrap key', $p, 'imports no wrap key',
	"SELECT snowseq_import_wrap_keys('/dev/null')", $DENIED);
cell($node, 'actors', 'PUBLIC', 'routing map', $p, 'reads the map (routing is everyone\'s)',
	'SELECT count(*) FROM snowseq_shard_map', '1');
cell($node, 'actors', 'PUBLIC', 'routing map', $p, 'changes no route',
	"UPDATE snowseq_shard_map SET shard = 'elsewhere'", $DENIED);
cell($node, 'actors', 'PUBLIC', 'move record', $p, 'reads no move', 'SELECT count(*) FROM snowseq_moves', $DENIED);
cell($node, 'actors', 'PUBLIC', 'move record', $p, 'moves nothing',
	"CALL snowseq_move_genes(0, 1, 'elsewhere')", $DENIED);
cell($node, 'actors', 'PUBLIC', 'fence', $p, 'reads no fence', 'SELECT count(*) FROM snowseq_fence', $DENIED);
cell($node, 'actors', 'PUBLIC', 'fence', $p, 'sets no fence', "SELECT snowseq_fence_state(1, 'block')", $DENIED);
cell($node, 'actors', 'PUBLIC', 'status', $p, 'reads no status', 'SELECT count(*) FROM snowseq_status', $DENIED);
# issue 26 (6): 1.2 showed every database's counters to PUBLIC
cell($node, 'actors', 'PUBLIC', 'status', $p, 'reads no reservation, in no database',
	'SELECT count(*) FROM snowseq_reservations()', $DENIED);

# ---- the database owner (owns public in PostgreSQL 15 and later) ----
my $o = 'regress_dbowner';
cell($node, 'actors', 'database owner', 'clock', $o, 'may not set snowseq\'s settings for its database',
	'ALTER DATABASE actors SET snowseq.test_pause_at = \'reset_locked\'', $DENIED);
# issue 26 (1): a floor planted under the name the counter will have, in
# the extension's schema, with a maximum of 5: 1.2 adopted it
my $hash = sub { su('actors', "SELECT left(encode(sha256(convert_to('$_[0]', 'UTF8')), 'hex'), 32)") };
cell($node, 'actors', 'database owner', 'counter', $o, 'plants a floor in the schema it owns',
	sprintf('CREATE SEQUENCE public.snowseq_floor_%s MAXVALUE 5; SELECT setval(\'public.snowseq_floor_%s\', 1)',
		$hash->('planted'), $hash->('planted')));
su('actors', "SELECT snowseq_create_counter('planted')");
is(su('actors', "SELECT string_agg(v::text, ',')
	FROM (SELECT snowseq_counter_next('planted') AS v FROM generate_series(1, 7)) t"), '1,2,3,4,5,6,7',
	'database owner x counter: the planted floor is not adopted: the counter issues past its maximum, from 1');
cell($node, 'actors', 'database owner', 'counter', $o, 'cannot lower a counter\'s floor',
	"SELECT setval('$floor', 1)", $DENIED);
cell($node, 'actors', 'database owner', 'counter', $o, 'cannot drop a counter\'s floor',
	"DROP SEQUENCE $floor", qr/must be owner of sequence/);
cell($node, 'actors', 'database owner', 'counter', $o, 'writes no definition',
	"UPDATE snowseq_counters SET start = 0", $DENIED);
cell($node, 'actors', 'database owner', 'counter', $o, 'drops no extension',
	'DROP EXTENSION snowseq', qr/must be owner of extension snowseq/);
# a schema snowseq_state the database owner made first is not adopted
su('postgres', 'CREATE DATABASE actors2 OWNER regress_dbowner');
su('actors2', 'CREATE EXTENSION snowseq');
cell($node, 'actors2', 'database owner', 'counter', $o, 'makes a schema snowseq_state first',
	'CREATE SCHEMA snowseq_state');
like(($node->psql('actors2', "SELECT snowseq_create_counter('c')"))[2] // '',
	qr/schema "snowseq_state" is not snowseq's to trust: its owner regress_dbowner is not a superuser/,
	'database owner x counter: snowseq refuses a schema snowseq_state it did not make');
my ($rc2, $out2, $err2) = $node->psql('actors2', "SELECT snowseq_create_counter('c')");
like($err2, qr/not snowseq's to trust/, 'database owner x counter: and keeps refusing it');
cell($node, 'actors', 'database owner', 'key version', $o, 'reads no key',
	'SELECT count(*) FROM snowseq_key_store', $DENIED);
cell($node, 'actors', 'database owner', 'routing map', $o, 'changes no route',
	"DELETE FROM snowseq_shard_map", $DENIED);
cell($node, 'actors', 'database owner', 'status', $o, 'reads no status',
	'SELECT count(*) FROM snowseq_reservations()', $DENIED);

# ---- a role with CREATE on the extension's schema ----
# issue 26 (1): a floor planted as a view: 1.2 failed "is not a sequence"
cell($node, 'actors', 'CREATE on the extension schema', 'counter', 'regress_creator',
	'plants a view under a counter\'s floor name',
	sprintf('CREATE VIEW public.snowseq_floor_%s AS SELECT 1 AS last_value', $hash->('viewed')));
su('actors', "SELECT snowseq_create_counter('viewed')");
is(su('actors', "SELECT snowseq_counter_next('viewed')"), '1',
	'CREATE on the extension schema x counter: the planted view is not adopted');

# ---- an administrator's grants on snowseq's tables ----
my $t = 'regress_tablegrant';
# issue 26 (5): with INSERT and UPDATE on the definitions, 1.2 let a role
# rewrite owner and acl and draw from another role's counter
cell($node, 'actors', 'table grantee', 'counter', $t, 'cannot write the definitions through its grant',
	"UPDATE snowseq_counters SET dropped = false", qr/table snowseq_counters is written by snowseq's functions alone/);
cell($node, 'actors', 'table grantee', 'counter', $t, 'and draws from no other role\'s counter',
	"SELECT snowseq_counter_next('owned')", qr/permission denied for counter "owned"/);
cell($node, 'actors', 'table grantee', 'key version', $t, 'cannot plant a key it knows',
	"INSERT INTO snowseq_key_store (version, state, key, version_bits, check_bits) VALUES (99, 'active', '\\x" .
	  ('00' x 32) . "', 8, 4)", qr/table snowseq_key_store is written by snowseq's functions alone/);
# the resolver and cleanup act on a move's record as the role it names
# (mover), and the fence trigger on a fence's row: a grant on those tables
# steers neither (1.2 let a grantee write them); mover 10 is the bootstrap
# superuser, whatever its name
cell($node, 'actors', 'table grantee', 'move record', $t, 'cannot name another mover through its grant',
	"UPDATE snowseq_moves SET mover = 10", qr/table snowseq_moves is written by snowseq's functions alone/);
cell($node, 'actors', 'table grantee', 'move record', $t, 'nor plant the record of an object to drop',
	"INSERT INTO snowseq_move_objects VALUES (1, 'here', 'table', 'public.orders')",
	qr/table snowseq_move_objects is written by snowseq's functions alone/);
cell($node, 'actors', 'table grantee', 'fence', $t, 'cannot plant a fence',
	"INSERT INTO snowseq_fence (token, relid, state, to_server) VALUES ('x', 'snowseq_shard_map'::regclass, 'reject', 'elsewhere')",
	qr/table snowseq_fence is written by snowseq's functions alone/);
cell($node, 'actors', 'table grantee', 'fence', $t, 'nor empty the fences',
	"TRUNCATE snowseq_fence", qr/table snowseq_fence is written by snowseq's functions alone/);
cell($node, 'actors', 'table grantee', 'routing map', $t, 'changes routes (its right)',
	"UPDATE snowseq_shard_map SET shard = 'here'");

# ---- a grantee of admin functions ----
my $f = 'regress_admin';
cell($node, 'actors', 'function grantee', 'clock', $f, 'takes a batch (its grant)',
	'SELECT count(*) FROM snowseq_next_n(10)', '10');
cell($node, 'actors', 'function grantee', 'counter', $f, 'creates a counter it owns',
	"SELECT snowseq_create_counter('admins')");
cell($node, 'actors', 'function grantee', 'counter', $f, 'and draws from it',
	"SELECT snowseq_counter_next('admins')", '1');
cell($node, 'actors', 'function grantee', 'counter', $f, 'draws from no other role\'s counter',
	"SELECT snowseq_counter_next('owned')", qr/permission denied for counter "owned"/);
cell($node, 'actors', 'function grantee', 'counter', $f, 'cannot continue another role\'s dropped counter',
	"SELECT snowseq_create_counter('owned')", qr/already exists/);

# ---- the counter's owner and its grantee ----
cell($node, 'actors', 'counter owner', 'counter', 'regress_owner', 'draws', "SELECT snowseq_counter_next('owned') > 0", 't');
cell($node, 'actors', 'counter owner', 'counter', 'regress_owner', 'cannot lower its counter\'s record',
	"SELECT setval('$floor', 1)", $DENIED);
cell($node, 'actors', 'counter owner', 'counter', 'regress_owner', 'grants',
	"SELECT snowseq_grant_counter('owned', 'regress_monitor')");
cell($node, 'actors', 'counter owner', 'status', 'regress_owner', 'sees its counters in the view',
	"SELECT string_agg(name, ',' ORDER BY name) FROM snowseq_counter_status", 'owned,owned_s');
like(($node->psql('actors', 'DROP ROLE regress_owner'))[2] // '',
	qr/role "regress_owner" cannot be dropped because some objects depend on it.*privileges for sequence snowseq_state/s,
	'counter owner x counter: the owner of a counter cannot be dropped while it is (no dangling owner)');
cell($node, 'actors', 'counter grantee', 'counter', 'regress_grantee', 'draws',
	"SELECT snowseq_counter_next('owned') > 0", 't');
cell($node, 'actors', 'counter grantee', 'counter', 'regress_grantee', 'passes the counter on to nobody',
	"SELECT snowseq_grant_counter('owned', 'regress_public')", qr/must be owner of counter "owned" to grant it/);
cell($node, 'actors', 'counter grantee', 'counter', 'regress_grantee', 'drops nothing',
	"SELECT snowseq_drop_counter('owned')", qr/must be owner of counter "owned" to drop it/);
cell($node, 'actors', 'counter grantee', 'status', 'regress_grantee', 'sees the counter granted, no other',
	"SELECT string_agg(name, ',') FROM snowseq_counter_status", 'owned');

# ---- the key administrator ----
my $k = 'regress_keyadmin';
cell($node, 'actors', 'key administrator', 'key version', $k, 'makes and uses a key',
	'SELECT snowseq_use_key(snowseq_new_key())');
cell($node, 'actors', 'key administrator', 'key version', $k, 'reads no key material',
	'SELECT key FROM snowseq_key_store', $DENIED);
# issue 26 (8): 1.2 told any grantee of the import which files exist and
# how large they are
cell($node, 'actors', 'key administrator', 'wrap key', $k, 'reads no server file without pg_read_server_files',
	"SELECT snowseq_import_wrap_keys('/etc/passwd')", qr/permission denied to import snowseq wrap keys from a file/);

# ---- REPLICATION: logical decoding of the key table ----
su('actors', 'GRANT EXECUTE ON FUNCTION snowseq_new_key(integer) TO regress_replication');
my ($drc, $decoded, $derr) = as_role($node, 'actors', 'regress_replication', q{
	SELECT 1 FROM pg_create_logical_replication_slot('actors', 'test_decoding');
	SELECT snowseq_new_key() > 0;
	SELECT string_agg(data, E'\n') FROM pg_logical_slot_get_changes('actors', NULL, NULL);
	SELECT 1 FROM pg_drop_replication_slot('actors');});
$checked{'REPLICATION x key version'}++;
like($decoded, qr/table public\.snowseq_key_store: INSERT: .*key\[bytea\]:'\\x[0-9a-f]{96}'/,
	'REPLICATION x key version: logical decoding shows a key row only with its key wrapped (48 bytes)')
  or diag($derr);

# ---- pg_read_all_data ----
my $r = 'regress_readall';
cell($node, 'actors', 'pg_read_all_data', 'counter', $r, 'reads definitions and floors (its role)',
	"SELECT count(*) > 0 FROM snowseq_counters, $floor", 't');
cell($node, 'actors', 'pg_read_all_data', 'counter', $r, 'changes no floor', "SELECT setval('$floor', 1)", $DENIED);
cell($node, 'actors', 'pg_read_all_data', 'key version', $r, 'reads keys only wrapped',
	'SELECT bool_and(octet_length(key) = 48) FROM snowseq_key_store WHERE key IS NOT NULL', 't');
cell($node, 'actors', 'pg_read_all_data', 'routing map', $r, 'reads the map', 'SELECT count(*) FROM snowseq_shard_map', '1');
cell($node, 'actors', 'pg_read_all_data', 'move record', $r, 'reads the moves', 'SELECT count(*) FROM snowseq_moves', '0');
cell($node, 'actors', 'pg_read_all_data', 'fence', $r, 'reads the fences', 'SELECT count(*) FROM snowseq_fence', '0');
cell($node, 'actors', 'pg_read_all_data', 'fence', $r, 'writes no fence', 'DELETE FROM snowseq_fence', $DENIED);

# ---- pg_monitor ----
my $m = 'regress_monitor';
cell($node, 'actors', 'pg_monitor', 'clock', $m, 'reads the clock\'s state', 'SELECT node_id FROM snowseq_status', '1');
cell($node, 'actors', 'pg_monitor', 'clock', $m, 'draws no batch', 'SELECT snowseq_next_n(1)', $DENIED);
cell($node, 'actors', 'pg_monitor', 'status', $m, 'reads every database\'s reservations (pg_read_all_stats)',
	"SELECT count(*) FROM snowseq_reservations WHERE kind = 'owned'", '1');
cell($node, 'actors', 'pg_monitor', 'counter', $m, 'draws only from a counter granted to it',
	"SELECT snowseq_counter_next('admins')", qr/permission denied for counter "admins"/);
cell($node, 'actors', 'pg_monitor', 'key version', $m, 'reads no key', 'SELECT count(*) FROM snowseq_key_store', $DENIED);
# a counter of another database: shown to pg_monitor, not to the role that
# may use the counter there (issue 26 (6))
su('postgres', "SELECT snowseq_create_counter('elsewhere')");
is($node->safe_psql('actors', "SET ROLE $m; SELECT database FROM snowseq_reservations WHERE kind = 'elsewhere'"),
	'postgres', 'pg_monitor x status: a counter of another database shows, with its database');
su('actors', 'GRANT EXECUTE ON FUNCTION snowseq_reservations() TO regress_grantee');
is($node->safe_psql('actors', "SET ROLE regress_grantee; SELECT string_agg(kind, ',' ORDER BY kind) FROM snowseq_reservations()
	WHERE kind NOT IN ('clock', 'segment', 'backfill', 'wide segment')"),
	'owned', 'counter grantee x status: given the function, it sees the counter it may use here, no other, none of another database');

# ---- pg_read_server_files and the holder of a keyring copy: wrap keys ----
# issue 26 (7): on a cluster without a keyring, a role allowed to import
# imports a wrap key it chose; 1.2 then wrapped every new key under it
my $fresh = snowseq_node('fresh', node_id => 2, conf => [ "timezone = 'UTC'" ]);
$fresh->safe_psql('postgres', q{
	CREATE EXTENSION pgcrypto;
	CREATE ROLE regress_files IN ROLE pg_read_server_files;
	GRANT EXECUTE ON FUNCTION snowseq_import_wrap_keys(text) TO regress_files;
});
my $chosen = '42' x 32;
open(my $fh, '>:raw', "$tmp/chosen.keyring") or die;
print $fh 'SNSQKR01' . pack('V', 0) . pack('V', 0) . pack('H*', $chosen);
close $fh;
chmod 0644, "$tmp/chosen.keyring";
$checked{'pg_read_server_files x wrap key'}++;
is($fresh->safe_psql('postgres', "SET ROLE regress_files; SELECT snowseq_import_wrap_keys('$tmp/chosen.keyring')"), '1',
	'pg_read_server_files x wrap key: a grantee of the import imports a wrap key it chose');
my $chosen_id = $fresh->safe_psql('postgres', "SELECT encode(substr(encrypt('snowseq wrap id'::bytea || '\\x00'::bytea, '\\x$chosen'::bytea, 'aes-ecb/pad:none'), 1, 8), 'hex')");
$fresh->safe_psql('postgres', 'SELECT snowseq_use_key(snowseq_new_key())');
my $wrapped_with = $fresh->safe_psql('postgres', "SELECT encode(substr(key, 1, 8), 'hex') FROM snowseq_key_store");
$checked{'holder of a keyring copy x wrap key'}++;
isnt($wrapped_with, $chosen_id, 'holder of a keyring copy x wrap key: new keys are wrapped under a wrap key the cluster made, not the imported one');
# entries of 56 bytes: identifier, key-encryption key's identifier, wrap key (sealed or not)
is(-s $fresh->data_dir . '/snowseq_keyring', 16 + 2 * 56, 'the keyring holds the imported wrap key and the cluster\'s own');

# issue 26 (8): imports are all or nothing, and take no more than a
# regular file.  A file of 64 wrap keys imports whole (1.2 added 63 of
# them, then refused every import); one that does not fit adds nothing.
sub keyring_file
{
	my ($path, $n, $seed) = @_;
	open(my $k, '>:raw', $path) or die;
	print $k 'SNSQKR01' . pack('V', 0) . pack('V', 0);
	print $k pack('H*', sprintf('%064x', $seed * 100000 + $_)) for 1 .. $n;
	close $k;
	chmod 0644, $path;
}
keyring_file("$tmp/k64", 64, 1);
is($fresh->safe_psql('postgres', "SELECT snowseq_import_wrap_keys('$tmp/k64')"), '64', 'a keyring of 64 wrap keys imports whole');
keyring_file("$tmp/k1024", 1024, 2);
my ($irc, $iout, $ierr) = $fresh->psql('postgres', "SELECT snowseq_import_wrap_keys('$tmp/k1024')");
like($ierr, qr/would give the snowseq keyring 1090, more than the 1024 it may hold.*Nothing was imported/s,
	'a keyring that does not fit is refused');
is(-s $fresh->data_dir . '/snowseq_keyring', 16 + 66 * 56, '... and nothing of it was added');
# a FIFO: 1.2 blocked in open(), deaf to cancel and terminate; the test
# writes to the FIFO after a while, so that a blocked import comes back
my $fifo = "$tmp/keyring.fifo";
system('mkfifo', '-m', '0666', $fifo) == 0 or die 'mkfifo failed';
my ($fout, $ferr) = ('', '');
my $h = IPC::Run::start([ 'psql', '-XAtq', '-d', $fresh->connstr('postgres'), '-c',
	"SELECT snowseq_import_wrap_keys('$fifo')" ], '>', \$fout, '2>', \$ferr);
my $waited = 0;
while ($h->pumpable && $waited < 600)
{
	IPC::Run::pump_nb($h);
	last unless $h->pumpable;
	select(undef, undef, undef, 0.1);
	$waited++;
}
if ($h->pumpable)
{
	# blocked: let it go
	open(my $w, '>', $fifo) or die;
	close $w;
}
$h->finish;
like($ferr, qr/"\Q$fifo\E" is not a regular file/, 'an import of a FIFO is refused at once, not waited on');
ok($waited < 600, 'the FIFO import came back without the writer');
$fresh->stop;

# issue 26 (2): a counter's place freed, then DROP/CREATE EXTENSION into
# another schema and the counter created again: 1.2 looked for its floor
# in the new schema only and issued its values again
my $places = snowseq_node('places', node_id => 3, conf => [ 'snowseq.max_counters = 2' ]);
$places->safe_psql('postgres', q{
	SELECT snowseq_create_counter('z', 100);
	SELECT count(snowseq_counter_next('z')) FROM generate_series(1, 100);
	SELECT snowseq_drop_counter('z');
	SELECT snowseq_create_counter('a'); SELECT snowseq_counter_next('a');
	SELECT snowseq_drop_counter('a');
	SELECT snowseq_create_counter('b'); SELECT snowseq_counter_next('b');
	SELECT snowseq_drop_counter('b');});
is($places->safe_psql('postgres', "SELECT count(*) FROM snowseq_reservations WHERE kind = 'z'"), '0',
	'the place of the dropped counter z was freed for others');
$places->safe_psql('postgres', 'DROP EXTENSION snowseq; CREATE SCHEMA s2; CREATE EXTENSION snowseq SCHEMA s2');
my $again = $places->safe_psql('postgres', q{
	SELECT s2.snowseq_create_counter('z', 100);
	SELECT s2.snowseq_counter_next('z');});
$again =~ s/^\s+//;
cmp_ok($again, '>', 199, "created again in another schema after DROP/CREATE EXTENSION, z continues above 199 ($again)");
$places->stop;

# every cell marked check ran
for my $a (@ACTORS)
{
	for my $obj (@OBJECTS)
	{
		next unless ($MATRIX{$a}{$obj} // '') eq 'check';
		ok($checked{"$a x $obj"}, "matrix: the check of $a x $obj ran");
	}
}
$node->stop;
done_testing();
