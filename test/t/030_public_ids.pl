# Public IDs across sessions and servers, and what must never leak.
#
# - Rights: a role without grants can neither read the keys (table, view,
#   COPY, pg_dump) nor call the functions; encryption and key management
#   are GRANTs, and a key administrator needs no right on the key table.
# - Logs: with every statement, every nested statement (auto_explain, with
#   parameters) and the parse trees and plans logged, no form of any key
#   (hex, base64, a fragment) appears in the server log of the primary, its
#   standby, a logical subscriber or a restored copy.
# - A physical standby decrypts what its primary encrypted, and encrypts to
#   the same public IDs; a long-lived session on the primary, on the standby
#   and on a logical subscriber of the key table each see a key rotation and
#   a retirement committed elsewhere.
# - Keys are stored wrapped under the wrap key of the data directory's
#   keyring: a role with only LOGIN REPLICATION that reads the key table's
#   changes through logical decoding (test_decoding) gets no key that
#   reproduces a public ID; a logical subscriber and a restored copy in
#   another cluster decrypt once they import a copy of the keyring file,
#   and say what is missing before.
# - pg_dump keeps the keys (and the dump holds them); a restore into a
#   server with another snowseq.public_version_bits fails loudly.
# - snowseq.public_version_bits: a value in postgresql.conf is applied, a bad
#   one stops the server, a changed one makes every use an ERROR.
use strict;
use warnings;
use lib 'test';
use File::Copy qw(copy);
use IPC::Run ();
use MIME::Base64 ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $dir = $PostgreSQL::Test::Utils::tmp_check;

# Log everything a server can be told to log about a statement.
my @LOG_ALL = (
	"log_statement = all",
	"log_min_duration_statement = 0",
	"log_error_verbosity = verbose",
	"log_parameter_max_length = -1",
	"log_parameter_max_length_on_error = -1",
	"session_preload_libraries = 'auto_explain'",
	"auto_explain.log_min_duration = 0",
	"auto_explain.log_nested_statements = on",
	"auto_explain.log_analyze = on",
	"auto_explain.log_verbose = on",
	"auto_explain.log_triggers = on");

# A query in a long-lived session; returns (output, stderr of this query).
sub bg
{
	my ($session, $sql) = @_;
	$session->{stderr} = '';
	my $out = $session->query($sql);
	return ($out, $session->{stderr});
}

# psql as a role; returns (exit code, stdout, stderr).
sub as_role
{
	my ($node, $role, $sql, $db) = @_;
	return $node->psql($db // 'postgres', $sql, extra_params => [ '-U', $role ]);
}

# Run a client program; returns (exit code, stdout, stderr).
sub run_prog
{
	my (@cmd) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '>', \$out, '2>', \$err);
	return ($? >> 8, $out, $err);
}

# The version field of a public ID (6 version bits).
sub version_of { return ($_[0] >> 42) & 63; }

# Every form of the keys a log line could carry.  Never printed.
sub key_forms
{
	my (@hex) = @_;
	my @forms;
	for my $h (@hex)
	{
		my $raw = pack('H*', $h);
		my $b64 = MIME::Base64::encode_base64($raw, '');
		(my $b64_bare = $b64) =~ s/=+$//;
		push @forms, lc $h, uc $h, $b64, $b64_bare,
		  lc substr($h, 0, 24), lc substr($h, -24), substr($b64, 0, 16);
		# a constant in a printed parse tree or plan: its bytes in decimal
		for my $at (0, 20)
		{
			push @forms, join(' ', unpack("x$at c12", $raw)), join(' ', unpack("x$at C12", $raw));
		}
	}
	return @forms;
}

# How many of the forms occur in a text (0 is the only right answer).
sub leaks
{
	my ($text, @forms) = @_;
	return scalar grep { index($text, $_) >= 0 } @forms;
}

# ---- the primary: rights, and keys made by a key administrator ----
my $primary = snowseq_node('primary', streaming => 1,
	conf => [ @LOG_ALL, 'wal_level = logical' ]);
$primary->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	CREATE ROLE keyadmin LOGIN;
	CREATE ROLE outsider LOGIN;
	GRANT EXECUTE ON FUNCTION snowseq_encrypt(bigint), snowseq_decrypt(bigint) TO app;
	GRANT EXECUTE ON FUNCTION snowseq_new_key(integer), snowseq_use_key(integer),
		snowseq_retire_key(integer) TO keyadmin;
	GRANT SELECT ON snowseq_keys TO keyadmin;
	CREATE TABLE orders (id bigint PRIMARY KEY, buyer text NOT NULL);
	GRANT SELECT ON orders TO app;
});
my ($rc, $out, $err) = as_role($primary, 'keyadmin', q{
	SET debug_print_parse = on;
	SET debug_print_rewritten = on;
	SET debug_print_plan = on;
	SELECT snowseq_use_key(snowseq_new_key());
	SELECT version || ':' || state FROM snowseq_keys;
});
is($rc, 0, 'a key administrator without rights on the key table makes and uses a key');
like($out, qr/^1:current$/m, 'key version 1 is current');

# the key table as its owner sees it (never printed)
my %hex = map { split /\|/ }
  split /\n/, $primary->safe_psql('postgres',
	"SELECT version, encode(key, 'hex') FROM snowseq_key_store WHERE key IS NOT NULL");
is(scalar(keys %hex), 1, 'one key, stored');
is(length($hex{1}), 96, 'a key stored wrapped: 48 bytes (wrap key identifier, RFC 3394 wrap of 32 bytes)');
ok(-f $primary->data_dir . '/snowseq_keyring', 'the primary made its keyring file');
is(sprintf('%o', (stat($primary->data_dir . '/snowseq_keyring'))[2] & 07777), '600',
	'only the server\'s OS user reads the keyring file');

for my $q (
	[ 'SELECT key FROM snowseq_key_store',           qr/permission denied for table snowseq_key_store/ ],
	[ 'COPY snowseq_key_store TO STDOUT',            qr/permission denied for table snowseq_key_store/ ],
	[ 'SELECT * FROM snowseq_keys',                  qr/permission denied for view snowseq_keys/ ],
	[ 'SELECT snowseq_encrypt(1)',                   qr/permission denied for function snowseq_encrypt/ ],
	[ 'SELECT snowseq_decrypt(1)',                   qr/permission denied for function snowseq_decrypt/ ],
	[ 'SELECT snowseq_new_key()',                    qr/permission denied for function snowseq_new_key/ ],
	[ 'SELECT snowseq_use_key(1)',                   qr/permission denied for function snowseq_use_key/ ],
	[ 'SELECT snowseq_retire_key(1)',                qr/permission denied for function snowseq_retire_key/ ],
	[ 'SELECT snowseq_key_store_trigger()',          qr/snowseq_key_store_trigger must be called as a trigger/ ])
{
	($rc, $out, $err) = as_role($primary, 'outsider', $q->[0]);
	like($err, $q->[1], "a role without grants: $q->[0] is refused");
	is($out, '', "a role without grants: $q->[0] returns nothing");
}
($rc, $out, $err) = as_role($primary, 'app', 'SELECT key FROM snowseq_key_store');
like($err, qr/permission denied for table snowseq_key_store/, 'the application role cannot read the keys either');
($rc, $out, $err) = as_role($primary, 'app', 'SELECT snowseq_new_key()');
like($err, qr/permission denied for function snowseq_new_key/, 'nor make keys');
$primary->safe_psql('postgres', 'GRANT SELECT ON orders, snowseq_shard_map, snowseq_counters TO outsider');
($rc, $out, $err) = run_prog('pg_dump', '-d', $primary->connstr('postgres') . ' user=outsider', '-f', "$dir/outsider.sql");
isnt($rc, 0, 'pg_dump by a role that may read everything but the keys fails instead of leaving them out');
like($err, qr/permission denied for table snowseq_key_store/, 'pg_dump names the key table');

# orders with gene IDs; the application computes their public IDs
$primary->safe_psql('postgres',
	"INSERT INTO orders SELECT snowseq_gene_next('buyer-' || g % 50), 'buyer-' || g % 50 FROM generate_series(1, 2000) g");
my %pub1 = map { split /\|/ }
  split /\n/, $primary->safe_psql('postgres', 'SELECT id, snowseq_encrypt(id) FROM orders', extra_params => [ '-U', 'app' ]);
is(scalar(keys %pub1), 2000, 'the application made 2000 public IDs');
ok(!(grep { version_of($pub1{$_}) != 1 || ($pub1{$_} >> 48) != ($_ >> 48) } keys %pub1),
	'each keeps its gene and carries key version 1');
my %seen;
ok(!(grep { $seen{$_}++ } values %pub1), 'no two orders share a public ID');
my $vals = join(',', map { "($_, $pub1{$_})" } sort keys %pub1);
is($primary->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE snowseq_decrypt(p) = id) FROM (VALUES $vals) v(id, p)",
		extra_params => [ '-U', 'app' ]),
	'2000', 'the primary decrypts every public ID to its order');

# ---- a physical standby ----
$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE snowseq_decrypt(p) = id) || '/' || count(*) FILTER (WHERE snowseq_encrypt(id) = p)
		 FROM (VALUES $vals) v(id, p)", extra_params => [ '-U', 'app' ]),
	'2000/2000', 'the standby decrypts what its primary encrypted, and encrypts the same way');
($rc, $out, $err) = as_role($standby, 'outsider', 'SELECT key FROM snowseq_key_store');
like($err, qr/permission denied for table snowseq_key_store/, 'on the standby too, no role without grants reads the keys');

# ---- a logical subscriber of the key table, for servers that share keys ----
my $sub = snowseq_node('subscriber', node_id => 3, conf => [@LOG_ALL]);
$sub->safe_psql('postgres', 'CREATE ROLE app LOGIN');
$sub->safe_psql('postgres',
	'GRANT EXECUTE ON FUNCTION snowseq_encrypt(bigint), snowseq_decrypt(bigint) TO app');
$primary->safe_psql('postgres', 'CREATE PUBLICATION snowseq_keys_pub FOR TABLE snowseq_key_store');
copy($primary->data_dir . '/snowseq_keyring', "$dir/primary_keyring") or die "copy: $!";
is($sub->safe_psql('postgres', "SELECT snowseq_import_wrap_keys('$dir/primary_keyring')"), '1',
	'the subscriber imports the publisher\'s wrap key from a copy of its keyring file');
is($sub->safe_psql('postgres', "SELECT snowseq_import_wrap_keys('$dir/primary_keyring')"), '0',
	'importing it again adds nothing');
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION snowseq_keys_sub CONNECTION '" . $primary->connstr . ' dbname=postgres'
	  . "' PUBLICATION snowseq_keys_pub");
$sub->wait_for_subscription_sync($primary, 'snowseq_keys_sub');
is($sub->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE snowseq_decrypt(p) = id) FROM (VALUES $vals) v(id, p)",
		extra_params => [ '-U', 'app' ]),
	'2000', 'a logical subscriber of the key table decrypts the publisher\'s public IDs');

# ---- rotation seen by sessions that hold the keys already ----
my ($some_id) = sort keys %pub1;
my %sessions = (
	'primary'    => $primary->background_psql('postgres', on_error_stop => 0, extra_params => [ '-U', 'app' ]),
	'standby'    => $standby->background_psql('postgres', on_error_stop => 0, extra_params => [ '-U', 'app' ]),
	'subscriber' => $sub->background_psql('postgres', on_error_stop => 0, extra_params => [ '-U', 'app' ]));
for my $where (sort keys %sessions)
{
	my ($o, $e) = bg($sessions{$where}, "SELECT snowseq_encrypt($some_id)");
	is("$o$e", $pub1{$some_id}, "$where: a long-lived session encrypts with key version 1");
}

# a role with only LOGIN REPLICATION watches the key table's changes
$primary->safe_psql('postgres', 'CREATE ROLE peeker LOGIN REPLICATION');
($rc, $out, $err) = as_role($primary, 'peeker',
	"SELECT 1 FROM pg_create_logical_replication_slot('peek', 'test_decoding')");
is($rc, 0, 'a role with only LOGIN REPLICATION makes a test_decoding slot') or diag($err);

($rc, $out, $err) = as_role($primary, 'keyadmin', 'SELECT snowseq_use_key(snowseq_new_key(check_bits => 0))');
is($rc, 0, 'key version 2 (no check bits) made and in use');
%hex = (%hex, map { split /\|/ }
	  split /\n/, $primary->safe_psql('postgres',
		"SELECT version, encode(key, 'hex') FROM snowseq_key_store WHERE key IS NOT NULL"));
is(scalar(keys %hex), 2, 'two keys stored');
$primary->wait_for_catchup($standby);
$primary->wait_for_catchup('snowseq_keys_sub');

my $pub2 = $primary->safe_psql('postgres', "SELECT snowseq_encrypt($some_id)", extra_params => [ '-U', 'app' ]);
is(version_of($pub2), 2, 'a new session on the primary encrypts with key version 2');

# what logical decoding showed the REPLICATION role: the stored (wrapped)
# form, from which no 32 bytes reproduce the public ID (with 1.1, the
# decoded key itself did); the probe reads the stored form from the table,
# so that no statement carries it into the log
($rc, $out, $err) = as_role($primary, 'peeker',
	"SELECT data FROM pg_logical_slot_get_changes('peek', NULL, NULL) WHERE data LIKE '%snowseq_key_store: INSERT%'");
my ($decoded) = $out =~ /key\[bytea\]:'\\x([0-9a-f]+)'/;
ok(defined $decoded, 'the REPLICATION role decodes the key row') or diag("$out$err");
$decoded //= '';
is($decoded, $hex{2}, 'it sees the stored form of key version 2');
$primary->safe_psql('postgres', q{
	CREATE FUNCTION ff1_probe(key bytea, tweak bytea, nbits integer, x bigint, decrypt boolean)
		RETURNS bigint AS '$libdir/snowseq', 'snowseq_ff1_test_bits' LANGUAGE C STRICT});
is($primary->safe_psql('postgres', qq{
	SELECT count(*) FILTER (WHERE ff1_probe(substr(d, o, 32), int2send(($some_id >> 48)::smallint), 42,
		$some_id & ((1::bigint << 48) - 1), false) = ($pub2 & ((1::bigint << 42) - 1)))
	FROM (SELECT key AS d FROM snowseq_key_store WHERE version = 2) x,
		generate_series(1, greatest(octet_length(d) - 31, 0)) o}),
	'0', 'no 32 bytes of what the REPLICATION role decoded encrypt like key version 2');
$primary->safe_psql('postgres', "DROP FUNCTION ff1_probe; SELECT pg_drop_replication_slot('peek')");
for my $where (sort keys %sessions)
{
	my ($o, $e) = bg($sessions{$where}, "SELECT snowseq_encrypt($some_id)");
	is("$o$e", $pub2, "$where: the long-lived session encrypts with key version 2 once it is committed");
	($o, $e) = bg($sessions{$where}, "SELECT snowseq_decrypt($pub2) || ',' || snowseq_decrypt($pub1{$some_id})");
	is("$o$e", "$some_id,$some_id", "$where: it decrypts public IDs of versions 2 and 1");
}

($rc, $out, $err) = as_role($primary, 'keyadmin', 'SELECT snowseq_retire_key(1)');
is($rc, 0, 'key version 1 retired');
$primary->wait_for_catchup($standby);
$primary->wait_for_catchup('snowseq_keys_sub');
for my $where (sort keys %sessions)
{
	my ($o, $e) = bg($sessions{$where}, "SELECT snowseq_decrypt($pub1{$some_id})");
	like($e, qr/ERROR:\s+public ID $pub1{$some_id} was made with retired key version 1/,
		"$where: the long-lived session refuses a public ID of the retired key");
	is($o, '', "$where: and returns nothing for it");
	($o, $e) = bg($sessions{$where}, "SELECT snowseq_decrypt($pub2)");
	is("$o$e", $some_id, "$where: version 2 still decrypts");
}
$_->quit for values %sessions;
is($sub->safe_psql('postgres', "SELECT count(*) || '/' || count(key) FROM snowseq_key_store"), '2/1',
	'the subscriber has both versions, the retired one erased');

# ---- pg_dump and restore ----
my $dump = "$dir/primary.sql";
($rc, $out, $err) = run_prog('pg_dump', '-d', $primary->connstr('postgres'), '-f', $dump);
is($rc, 0, 'pg_dump by the superuser succeeds');
my $sql = slurp_file($dump);
like($sql, qr/^COPY public\.snowseq_key_store /m, 'the dump carries the key table');
ok(leaks($sql, lc $hex{2}) == 1, 'the dump holds the key: it is secret material');

my $restored = snowseq_node('restored', node_id => 2, conf => [@LOG_ALL], extension => 0);
$restored->safe_psql('postgres', 'CREATE ROLE app LOGIN; CREATE ROLE keyadmin LOGIN; CREATE ROLE outsider LOGIN');
($rc, $out, $err) = run_prog('psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $restored->connstr('postgres'), '-f', $dump);
is($rc, 0, 'the dump restores');
($rc, $out, $err) = as_role($restored, 'app', "SELECT snowseq_decrypt($pub2)");
like($err, qr/snowseq key version \d is wrapped with wrap key [0-9a-f]{16}, which this cluster's keyring does not have/,
	'another cluster cannot unwrap the restored keys, and says so');
like($err, qr/HINT:\s+Copy the file snowseq_keyring of that cluster's data directory to this server and import it/,
	'and says how to import the wrap key');
is($restored->safe_psql('postgres', "SELECT snowseq_import_wrap_keys('$dir/primary_keyring')"), '1',
	'the restored copy imports the source\'s wrap key');
is($restored->safe_psql('postgres', "SELECT snowseq_decrypt($pub2)", extra_params => [ '-U', 'app' ]), $some_id,
	'the restored copy decrypts public IDs of version 2');
($rc, $out, $err) = as_role($restored, 'app', "SELECT snowseq_decrypt($pub1{$some_id})");
like($err, qr/retired key version 1/, 'and knows that version 1 is retired');

my $other = snowseq_node('other_width', node_id => 4, extension => 0,
	conf => [ 'snowseq.public_version_bits = 7' ]);
is($other->safe_psql('postgres', 'SHOW snowseq.public_version_bits'), '7',
	'snowseq.public_version_bits = 7 in postgresql.conf is applied');
$other->safe_psql('postgres', 'CREATE ROLE app LOGIN; CREATE ROLE keyadmin LOGIN; CREATE ROLE outsider LOGIN');
($rc, $out, $err) = run_prog('psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $other->connstr('postgres'), '-f', $dump);
isnt($rc, 0, 'the dump does not restore into a server with 7 version bits');
like($err, qr/snowseq key version \d was made for snowseq\.public_version_bits = 6, but the server runs with 7/,
	'it says why');
$other->stop;

# a server restarted with another width refuses to read its keys
$restored->append_conf('postgresql.conf', 'snowseq.public_version_bits = 5');
$restored->restart;
($rc, $out, $err) = $restored->psql('postgres', "SELECT snowseq_decrypt($pub2)");
like($err, qr/ERROR:\s+snowseq key version \d was made for snowseq\.public_version_bits = 6, but the server runs with 5/,
	'restarted with 5 version bits, decrypting is an ERROR that names the setting');
($rc, $out, $err) = $restored->psql('postgres', "SELECT snowseq_encrypt($some_id)");
like($err, qr/was made for snowseq\.public_version_bits = 6/, 'and so is encrypting');

# ---- bad values stop the server ----
for my $bad ('8', '4', 'six')
{
	my $node = snowseq_node("bad_$bad", start => 0, conf => ["snowseq.public_version_bits = '$bad'"]);
	my $started = $node->start(fail_ok => 1);
	ok(!$started, "snowseq.public_version_bits = '$bad': the server does not start");
	like(slurp_file($node->logfile),
		qr/FATAL:.*(is outside the valid range for parameter "snowseq\.public_version_bits" \(5 \.\. 7\)|invalid value for parameter "snowseq\.public_version_bits")/,
		"snowseq.public_version_bits = '$bad': the log says why");
}

# ---- no key in any log ----
my @forms = key_forms(values %hex);
my $plog = slurp_file($primary->logfile);
like($plog, qr/statement: SELECT snowseq_use_key\(snowseq_new_key\(\)\)/, 'primary log: statements are logged');
like($plog, qr/Query Text: INSERT INTO public\.snowseq_key_store/, 'primary log: nested statements are logged');
like($plog, qr/LOG:\s+(00000: )?plan:/, 'primary log: plans are logged');
for my $node ($primary, $standby, $sub, $restored)
{
	is(leaks(slurp_file($node->logfile), @forms), 0, $node->name . ': no key in the server log');
}
$standby->stop;
$sub->stop;
$restored->stop;
$primary->stop;

my $tlog = slurp_file("$PostgreSQL::Test::Utils::log_path/regress_log_030_public_ids");
is(leaks($tlog, @forms), 0, 'no key in this test\'s own log');

done_testing();
