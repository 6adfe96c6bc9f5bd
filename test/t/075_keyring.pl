# The keyring kept out of the data directory, and imports that leave room.
#
# - snowseq.keyring_command: the wrap keys in the file snowseq_keyring (and
#   in the WAL) are sealed under a key-encryption key that the command
#   prints from outside the data directory.  A role with only LOGIN
#   REPLICATION takes a pg_basebackup of the primary; the copy, started on
#   another port without the command, encrypts and decrypts no public ID
#   (a clear ERROR with a hint); started with the command, and as a
#   streaming standby, it decrypts what the primary encrypted.
# - A command that fails, prints no key, or prints a key that does not
#   unseal the keyring stops the server; the key is in no log line.
# - A keyring of 1.3 before sealing is sealed at the first start with the
#   command (no bare wrap key stays in the file); a new key-encryption key,
#   printed with the old one on a second line, seals it again.
# - Imports keep room for the cluster's own wrap key and refuse version
#   marks that leave no key version to make (63, 2^32-1);
#   snowseq_drop_wrap_keys() drops the imported wrap keys no key row uses.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $dir = $PostgreSQL::Test::Utils::tmp_check;

# 32 random bytes as 64 hex digits.
sub random_hex { return join '', map { sprintf '%02x', int(rand(256)) } 1 .. 32; }

# Write a file.
sub write_file
{
	my ($path, $data) = @_;
	open my $fh, '>:raw', $path or die "open $path: $!";
	print $fh $data;
	close $fh;
	chmod 0600, $path;
}

# The bytes of a file.
sub read_raw
{
	my ($path) = @_;
	open my $fh, '<:raw', $path or die "open $path: $!";
	local $/;
	my $d = <$fh>;
	close $fh;
	return $d;
}

# A keyring file as 1.3 wrote it before sealing: magic, version mark, own, bare wrap keys.
sub keyring_file
{
	my ($path, $mark, $n) = @_;
	write_file($path, 'SNSQKR02' . pack('VV', $mark, 0)
		  . join('', map { pack('C32', map { int(rand(256)) } 1 .. 32) } 1 .. $n));
}

my $kek = random_hex();
write_file("$dir/kek", "$kek\n");
my $command = "snowseq.keyring_command = 'cat $dir/kek'";

# ---- a primary whose keyring is sealed by a command ----
my $primary = snowseq_node('primary', streaming => 1, conf => [$command]);
$primary->safe_psql('postgres', q{
	CREATE ROLE repl LOGIN REPLICATION;
	SELECT snowseq_use_key(snowseq_new_key());
});
my $pub = $primary->safe_psql('postgres', 'SELECT snowseq_encrypt(123456789)');
like($pub, qr/^-?\d+$/, 'the primary encrypts with a sealed keyring');
is($primary->safe_psql('postgres', "SELECT snowseq_decrypt($pub)"), '123456789',
	'and decrypts');
is(substr(read_raw($primary->data_dir . '/snowseq_keyring'), 0, 8), 'SNSQKR03',
	'the keyring file holds entries');

# a REPLICATION-only role's base backup
my $bb = $primary->backup_dir . '/bb';
$primary->command_ok(
	[ 'pg_basebackup', '-D', $bb, '-h', $primary->host, '-p', $primary->port,
	  '-U', 'repl', '-X', 'stream', '--no-sync' ],
	'a role with only LOGIN REPLICATION takes a base backup');

# started elsewhere without the command
my $copy = PostgreSQL::Test::Cluster->new('copy');
$copy->init_from_backup($primary, 'bb');
$copy->append_conf('postgresql.conf', "snowseq.keyring_command = ''");
$copy->start;
my ($rc, $out, $err) = $copy->psql('postgres', "SELECT snowseq_decrypt($pub)");
isnt($out, '123456789', 'the copy without the command does not decrypt the primary\'s public ID');
like($err, qr/snowseq wrap key [0-9a-f]{16} is sealed under a key-encryption key this server does not have/,
	'the copy says why');
like($err, qr/HINT:\s+Set snowseq.keyring_command/, 'and what to do');
($rc, $out, $err) = $copy->psql('postgres', 'SELECT snowseq_encrypt(123456789)');
isnt($rc, 0, 'the copy without the command does not encrypt either');
isnt($out, $pub, 'and makes no public ID of the primary');
$copy->stop;

# the same copy with a wrong key-encryption key, a failing command, one printing no key: no start
for my $case ([ "echo " . random_hex(), qr/prints a key-encryption key that does not unseal this cluster's keyring/ ],
	[ 'false', qr/snowseq.keyring_command failed: child process exited with exit code 1/ ],
	[ 'echo not-a-key', qr/snowseq.keyring_command printed no valid key-encryption key/ ])
{
	my ($cmd, $re) = @$case;
	$copy->append_conf('postgresql.conf', "snowseq.keyring_command = '$cmd'");
	my $from = -s $copy->logfile;
	ok(!$copy->start(fail_ok => 1), "the server does not start with keyring_command '$cmd'");
	like(slurp_file($copy->logfile, $from), $re, "and says why ('$cmd')");
}

# with the command: a restore and a standby decrypt
$copy->append_conf('postgresql.conf', $command);
$copy->start;
is($copy->safe_psql('postgres', "SELECT snowseq_decrypt($pub)"), '123456789',
	'the copy with the command decrypts the primary\'s public ID');
$copy->stop;

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'bb', has_streaming => 1);
$standby->start;
$primary->safe_psql('postgres', 'SELECT snowseq_use_key(snowseq_new_key())');
my $pub2 = $primary->safe_psql('postgres', 'SELECT snowseq_encrypt(42)');
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', "SELECT snowseq_decrypt($pub), snowseq_decrypt($pub2)"),
	'123456789|42', 'a standby with the command decrypts the primary\'s public IDs, old and new');
$standby->restart;
is($standby->safe_psql('postgres', "SELECT snowseq_decrypt($pub2)"), '42',
	'and after a restart');
$primary->restart;
is($primary->safe_psql('postgres', "SELECT snowseq_decrypt($pub)"), '123456789',
	'the primary decrypts after a restart');

my $logs = join '', map { slurp_file($_->logfile) } ($primary, $copy, $standby);
is(index(lc $logs, $kek), -1, 'the key-encryption key is in no server log');

# ---- a keyring of 1.3 before sealing: sealed at the first start with the command ----
my $plain = snowseq_node('plain');
$plain->safe_psql('postgres', 'SELECT snowseq_use_key(snowseq_new_key())');
my $ppub = $plain->safe_psql('postgres', 'SELECT snowseq_encrypt(7)');
$plain->stop;
my $file = $plain->data_dir . '/snowseq_keyring';
my $before = read_raw($file);
# bare entries: identifier, zeros, wrap key, zeros
my @bare = map { substr($before, 16 + $_ * 56 + 16, 32) } 0 .. (length($before) - 16) / 56 - 1;
is(scalar(@bare), 1, 'the keyring without the command holds one wrap key, bare');
$plain->append_conf('postgresql.conf', $command);
$plain->start;
my $after = read_raw($file);
is(scalar(grep { index($after, $_) >= 0 } @bare), 0, 'with the command, no bare wrap key stays in the file');
is($plain->safe_psql('postgres', "SELECT snowseq_decrypt($ppub)"), '7', 'and its public IDs decrypt');

# a new key-encryption key, with the old one on a second line, then alone
my $kek2 = random_hex();
write_file("$dir/kek2", "$kek2\n$kek\n");
$plain->append_conf('postgresql.conf', "snowseq.keyring_command = 'cat $dir/kek2'");
$plain->restart;
write_file("$dir/kek2", "$kek2\n");
$plain->restart;
is($plain->safe_psql('postgres', "SELECT snowseq_decrypt($ppub)"), '7',
	'after a new key-encryption key, the old one dropped, public IDs decrypt');
$plain->append_conf('postgresql.conf', $command);
$plain->stop;
my $from = -s $plain->logfile;
ok(!$plain->start(fail_ok => 1), 'the old key-encryption key alone no longer starts the server');
like(slurp_file($plain->logfile, $from), qr/does not unseal this cluster's keyring/, 'and it says why');

# ---- imports leave room for the own wrap key and a key version ----
my $node = snowseq_node('imports');
$node->safe_psql('postgres', 'CREATE ROLE nobody LOGIN');
keyring_file("$dir/full", 0, 1024);
($rc, $out, $err) = $node->psql('postgres', "SELECT snowseq_import_wrap_keys('$dir/full')");
like($err, qr/importing 1024 new wrap keys would give the snowseq keyring 1024, more than the 1023 it may hold besides this cluster's own/,
	'an import of 1,024 wrap keys into a cluster without its own is refused');
for my $mark (63, 4294967295)
{
	keyring_file("$dir/mark", $mark, 1);
	($rc, $out, $err) = $node->psql('postgres', "SELECT snowseq_import_wrap_keys('$dir/mark')");
	like($err, qr/says key versions up to $mark were made, which leaves no key version of the 63/,
		"an import with version mark $mark is refused");
}
is($node->safe_psql('postgres', 'SELECT snowseq_use_key(snowseq_new_key())'), '',
	'after those imports a key is still made');
my $npub = $node->safe_psql('postgres', 'SELECT snowseq_encrypt(99)');
keyring_file("$dir/many", 62, 1024);
($rc, $out, $err) = $node->psql('postgres', "SELECT snowseq_import_wrap_keys('$dir/many')");
like($err, qr/importing 1024 new wrap keys would give the snowseq keyring 1025, more than the 1024 it may hold/,
	'with the own wrap key, 1,024 more do not fit');
keyring_file("$dir/many", 62, 1023);
is($node->safe_psql('postgres', "SELECT snowseq_import_wrap_keys('$dir/many')"), '1023',
	'1,023 do');
keyring_file("$dir/one", 0, 1);
($rc, $out, $err) = $node->psql('postgres', "SELECT snowseq_import_wrap_keys('$dir/one')");
like($err, qr/HINT:.*snowseq_drop_wrap_keys\(\)/, 'the keyring is full: the hint names the way out');
is($node->safe_psql('postgres', 'SELECT snowseq_use_key(snowseq_new_key())'), '',
	'the last key version of the mark is made');
($rc, $out, $err) = $node->psql('postgres', 'SELECT snowseq_drop_wrap_keys()', extra_params => [ '-U', 'nobody' ]);
like($err, qr/permission denied for function snowseq_drop_wrap_keys/, 'dropping wrap keys is a GRANT');
is($node->safe_psql('postgres', 'SELECT snowseq_drop_wrap_keys()'), '1023',
	'snowseq_drop_wrap_keys() drops the imported wrap keys no key row uses');
is($node->safe_psql('postgres', 'SELECT snowseq_drop_wrap_keys()'), '0', 'and then none');
is($node->safe_psql('postgres', "SELECT snowseq_import_wrap_keys('$dir/one')"), '1',
	'an import fits again');
$node->restart;
is($node->safe_psql('postgres', "SELECT snowseq_decrypt($npub)"), '99',
	'the own wrap key stayed: public IDs decrypt after a restart');

done_testing();
