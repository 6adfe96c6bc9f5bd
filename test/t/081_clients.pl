# The client guides (docs/clients/) as users run them: every program of a
# guide (a code block whose first line names its file; blocks of the same
# file are one program, in order) is written out and run with its client,
# node-postgres (npm, test/clients), psycopg 3, SQLAlchemy over psycopg 2,
# JDBC and psql, as the role app over TCP, in a database prepared by the
# guides' own SQL block.  A program checks what it shows (asserts) and ends
# with "FILE: ok"; the test then checks the rows it left from the server's
# side.  The 53-bit example runs on a server with the JavaScript-safe layout,
# and, as a control, on one with the default layout, where its parser must
# refuse the IDs.  A missing client is a failure, never a skip: test/check.sh
# installs them all (test/lib.sh, TEST_PACKAGES; npm ci in test/clients).
use strict;
use warnings;
use lib 'test';
use Cwd ();
use File::Path ();
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $timeout = 4 * $PostgreSQL::Test::Utils::timeout_default;
my $GUIDES = 'docs/clients';
my $MODULES = Cwd::abs_path('test/clients') . '/node_modules';
my @JARS = map { "/usr/share/java/$_.jar" } qw(postgresql guava lz4-java);
my $JAVA_CP = join(':', @JARS);

# The fenced code blocks of a guide: [language, text], in order.
sub blocks
{
	my ($file) = @_;
	my $md = slurp_file($file);
	my @b;
	push @b, [ $1, $2 ] while $md =~ /^```(\w*)\n(.*?)^```\s*$/msg;
	return @b;
}

# The programs of a guide: { file => source }, and its other blocks.
sub programs
{
	my ($file) = @_;
	my (%prog, @order, @other);
	for my $b (blocks($file))
	{
		if ($b->[1] =~ m{\A\s*(?://|#)\s*([A-Za-z0-9_-]+\.(?:js|py|java|sh))\b})
		{
			push @order, $1 unless exists $prog{$1};
			$prog{$1} .= $b->[1];
		}
		else
		{
			push @other, $b;
		}
	}
	return (\%prog, \@order, \@other);
}

# Run a command with the libpq environment of database $db on $node as app;
# returns (exit code, stdout, stderr).
sub run_client
{
	my ($node, $db, $dir, @cmd) = @_;
	local $ENV{PGHOST} = '127.0.0.1';
	local $ENV{PGPORT} = $node->port;
	local $ENV{PGDATABASE} = $db;
	local $ENV{PGUSER} = 'app';
	local $ENV{NODE_PATH} = $MODULES;
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run([ 'sh', '-c', 'cd "$0" && exec "$@"', $dir, @cmd ],
			'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout($timeout));
		1;
	};
	return ($ok ? $? >> 8 : -1, $out, $ok ? $err : "$err$@");
}

# What each client needs is installed: a failure names it, nothing is skipped.
my %needs = (
	'node-postgres' => [ [ 'node', '-e', 'require("pg"); require("xxhash-wasm"); require("murmurhash3js-revisited")' ] ],
	psycopg => [ [ 'python3', '-c', 'import psycopg, xxhash, ctypes; ctypes.CDLL("libmurmurhash.so.2")' ] ],
	sqlalchemy => [ [ 'python3', '-c', 'import sqlalchemy, psycopg2' ] ],
	jdbc => [ [ 'java', '-version' ], map { [ 'test', '-r', $_ ] } @JARS ],
	psql => [ [ 'psql', '--version' ] ]);
my %runner = (js => [ 'node' ], py => [ 'python3' ], sh => [ 'bash' ],
	java => [ 'java', '-cp', $JAVA_CP ]);

# two servers reachable over TCP: the default layout, and the
# JavaScript-safe one (41/5/7) for the 53-bit example
my @tcp = ("listen_addresses = '127.0.0.1'");
my $node = snowseq_node('clients', conf => \@tcp, extension => 0);
my $js = snowseq_node('clients53', extension => 0,
	conf => [ @tcp, 'snowseq.time_bits = 41', 'snowseq.node_bits = 5', 'snowseq.seq_bits = 7' ]);

# the guides' setup: a superuser prepares each database (the SQL block of
# docs/clients/README.md), owned by the role app
my @setup = grep { $_->[0] eq 'sql' } blocks("$GUIDES/README.md");
is(scalar(@setup), 1, 'the clients guide has one SQL block: the setup of the examples');
my $setup = $setup[0][1];
$_->safe_psql('postgres', 'CREATE ROLE app LOGIN') for $node, $js;
sub prepare_db
{
	my ($n, $db) = @_;
	$n->safe_psql('postgres', "CREATE DATABASE $db OWNER app");
	$n->safe_psql($db, $setup);
}

my $work = "$PostgreSQL::Test::Utils::tmp_check/clients";
my @guides = qw(node-postgres psycopg sqlalchemy jdbc psql);
# the ORM guides are test/t/082_orms.pl's
my @orm_guides = qw(django activerecord knex hibernate);
is_deeply([ sort map { m{([^/]+)\.md$} } glob("$GUIDES/*.md") ], [ sort('README', @guides, @orm_guides) ],
	'every client guide is tested here or by 082_orms.pl');

for my $guide (@guides)
{
	my ($prog, $order, $other) = programs("$GUIDES/$guide.md");
	ok(@$order, "$guide: the guide has programs (@$order)");
	for my $need (@{ $needs{$guide} })
	{
		my ($rc, $out, $err) = run_client($node, 'postgres', '.', @$need);
		is($rc, 0, "$guide: installed (@$need)") or diag($err);
	}
	# blocks that are not programs: the JDBC guide's command line, which is
	# the one this test runs
	for my $b (@$other)
	{
		if ($guide eq 'jdbc' && $b->[0] eq 'sh')
		{
			is($b->[1], "java -cp $JAVA_CP Orders.java\n", 'jdbc: the command in the guide is the one run here');
		}
		else
		{
			fail("$guide: a $b->[0] block that is neither a program nor known here:\n$b->[1]");
		}
	}

	my $dir = "$work/$guide";
	File::Path::make_path($dir);
	for my $file (@$order)
	{
		open my $fh, '>', "$dir/$file" or die "cannot write $dir/$file: $!";
		print $fh $prog->{$file};
		close $fh;
		my ($ext) = $file =~ /\.(\w+)$/;
		my $db = lc("${guide}_$file" =~ s/\W/_/gr);
		my $n = $file eq 'safe53.js' ? $js : $node;
		prepare_db($n, $db);
		my ($rc, $out, $err) = run_client($n, $db, $dir, @{ $runner{$ext} }, $file);
		is($rc, 0, "$guide: $file runs") or diag("stdout:\n$out\nstderr:\n$err");
		like($out, qr/^\Q$file\E: ok$/m, "$guide: $file checked everything it shows");

		# what the program left, seen from the server
		my $tables = $n->safe_psql($db,
			"SELECT string_agg(tablename, ' ' ORDER BY tablename) FROM pg_tables WHERE tableowner = 'app'");
		if ($tables =~ /\borders\b/)
		{
			is($n->safe_psql($db, 'SELECT count(*) > 0 AND bool_and(id > 0) AND count(DISTINCT id) = count(*) '
				  . 'AND bool_and(snowseq_node(id) = 1) FROM orders'),
				't', "$guide: $file left orders with snowflake IDs of this node");
		}
		if ($tables =~ /\bsales\b/)
		{
			is($n->safe_psql($db, 'SELECT count(*) > 0 AND bool_and(shard_of(order_id) = snowseq_gene(buyer)) FROM sales'),
				't', "$guide: $file left sales whose IDs carry their buyer's gene");
		}
		if ($tables =~ /\bdocs\b/)
		{
			is($n->safe_psql($db, "SELECT count(*) > 0 AND bool_and(substr(id::text, 15, 1) = '7') FROM docs"),
				't', "$guide: $file left docs with version 7 UUIDs");
		}
		if ($tables =~ /\bevents\b/)
		{
			is($n->safe_psql($db, 'SELECT count(*) = 1000 AND max(id) < 2^53 FROM events'),
				't', "$guide: $file left 1000 events with IDs below 2^53");
		}
		note("$guide: $file made no tables: its own checks are all") if $tables eq '';
	}
}

# the control: the 53-bit program against the default layout, whose IDs do
# not fit a Number, must fail in its parser, not lose digits
prepare_db($node, 'safe53_control');
my ($rc, $out, $err) = run_client($node, 'safe53_control', "$work/node-postgres", 'node', 'safe53.js');
isnt($rc, 0, 'safe53.js refuses the IDs of the default layout');
like($err, qr/does not fit a Number/, 'its type parser says why');

$node->stop;
$js->stop;
done_testing();
