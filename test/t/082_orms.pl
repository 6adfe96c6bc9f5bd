# ORMs that make their own tables (docs/clients/django.md, activerecord.md,
# knex.md, hibernate.md), with snowseq.auto_keys on in the database, as the
# guides say: every file of a guide (a code block whose first line names
# it, a path) is written out and the ORM runs its own migrations and
# inserts with it, as the role app, the database's owner, over TCP; the
# guide's SQL blocks run as app, each in a session of its own.  A program
# checks what it shows and ends with "FILE: ok"; the test then checks from
# the server's side that each table the migrations made takes
# snowseq_next(), has no sequence left and holds snowflake IDs of this
# node.  Also: Django's migrate of django.contrib's integer keys is refused
# with snowseq's message, CREATE EXTENSION (snowseq's own integer identity)
# is left alone, and so is a database without snowseq.  A missing ORM is a
# failure, never a skip: test/check.sh installs them (test/lib.sh).
use strict;
use warnings;
use lib 'test';
use Cwd ();
use File::Basename qw(dirname);
use File::Path ();
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $timeout = 4 * $PostgreSQL::Test::Utils::timeout_default;
my $GUIDES = 'docs/clients';
my $MODULES = Cwd::abs_path('test/clients') . '/node_modules';

# what each guide runs, and the tables its migrations make
my %guide = (
	django => { run => [ 'bash', 'migrate.sh' ], ok => 'orders.py',
		tables => [qw(shop_order shop_orderline)] },
	activerecord => { run => [ 'ruby', 'orders.rb' ], ok => 'orders.rb',
		tables => [qw(orders order_lines)] },
	knex => { run => [ 'node', 'orders.js' ], ok => 'orders.js',
		tables => [qw(orders order_lines)] },
	hibernate => { tables => [qw(orders)] });
my %needs = (
	django => [ 'python3', '-c', 'import django, psycopg2' ],
	activerecord => [ 'ruby', '-e', 'require "active_record"; require "pg"' ],
	knex => [ 'node', '-e', 'require("knex"); require("pg")' ]);

# The fenced code blocks of a guide: [language, text], in order.
sub blocks
{
	my ($file) = @_;
	my $md = slurp_file($file);
	my @b;
	push @b, [ $1, $2 ] while $md =~ /^```(\w*)\n(.*?)^```\s*$/msg;
	return @b;
}

# Run a command in $dir with the libpq environment of database $db as app;
# Debian's python3 first (python3-django).  Returns (exit code, stdout, stderr).
sub run_client
{
	my ($node, $db, $dir, @cmd) = @_;
	local $ENV{PGHOST} = '127.0.0.1';
	local $ENV{PGPORT} = $node->port;
	local $ENV{PGDATABASE} = $db;
	local $ENV{PGUSER} = 'app';
	local $ENV{NODE_PATH} = $MODULES;
	local $ENV{PATH} = "/usr/bin:$ENV{PATH}";
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run([ 'sh', '-c', 'cd "$0" && exec "$@"', $dir, @cmd ],
			'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout($timeout));
		1;
	};
	return ($ok ? $? >> 8 : -1, $out, $ok ? $err : "$err$@");
}

my $node = snowseq_node('orms', conf => ["listen_addresses = '127.0.0.1'"], extension => 0);
$node->safe_psql('postgres', 'CREATE ROLE app LOGIN');
my $work = "$PostgreSQL::Test::Utils::tmp_check/orms";

# A database owned by app, with snowseq.
sub shop_db
{
	my ($db) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db OWNER app");
	$node->safe_psql($db, 'CREATE EXTENSION snowseq');
}

is_deeply([ sort map { m{([^/]+)\.md$} } grep { !/README/ } glob("$GUIDES/*.md") ],
	[ sort(keys %guide, qw(node-postgres psycopg sqlalchemy jdbc psql)) ],
	'every client guide is tested: the ORMs here, the drivers by 081_clients.pl');

for my $name (sort keys %guide)
{
	my $g = $guide{$name};
	if ($needs{$name})
	{
		my ($rc, $out, $err) = run_client($node, 'postgres', '.', @{ $needs{$name} });
		is($rc, 0, "$name: installed (@{ $needs{$name} })") or diag($err);
	}
	my $db = 'shop';
	shop_db($db);
	my $dir = "$work/$name";
	File::Path::make_path($dir);
	my ($nsql, $nfiles) = (0, 0);
	for my $b (blocks("$GUIDES/$name.md"))
	{
		my ($lang, $text) = @$b;
		if ($lang eq 'sql')
		{
			# the guide's database is called shop, as here
			$node->safe_psql($db, $text, extra_params => [ '-U', 'app' ]);
			$nsql++;
		}
		elsif ($text =~ m{\A\s*(?://|#)\s*([A-Za-z0-9_./-]+\.(?:py|rb|js|sh))\s*$}m)
		{
			my $path = "$dir/$1";
			File::Path::make_path(dirname($path));
			open my $fh, '>', $path or die "cannot write $path: $!";
			print $fh $text;
			close $fh;
			$nfiles++;
		}
		elsif ($name eq 'hibernate' && $lang eq 'java')
		{
			like($text, qr/GenerationType\.IDENTITY/, 'hibernate: the entity key shown is IDENTITY');
		}
		else
		{
			fail("$name: a $lang block that is neither SQL nor a file:\n$text");
		}
	}
	ok($nsql >= 1, "$name: the guide turns auto_keys on ($nsql SQL blocks)");
	is($node->safe_psql($db, 'SHOW snowseq.auto_keys'), 'on', "$name: auto_keys is on in a new session");

	if ($g->{run})
	{
		ok($nfiles >= 2, "$name: the guide has its files ($nfiles)");
		# Django: the integer keys of django.contrib with the setting on
		# are refused by snowseq, as the guide says, in a database of its own
		if ($name eq 'django')
		{
			shop_db('shop_control');
			$node->safe_psql('postgres', 'ALTER DATABASE shop_control SET snowseq.auto_keys = on');
			my ($rc, $out, $err) = run_client($node, 'shop_control', $dir, 'env',
				'DJANGO_SETTINGS_MODULE=settings', 'PYTHONPATH=.', 'python3', '-m', 'django', 'migrate',
				'contenttypes');
			isnt($rc, 0, 'django: migrate of contenttypes with auto_keys on fails');
			like($err, qr/primary key "id" of table "django_content_type" is of type integer: snowflake IDs do not fit in it/,
				'django: snowseq says why, through Django');
			like($err, qr/HINT:.*BigAutoField/, 'django: and what to declare');
		}
		my ($rc, $out, $err) = run_client($node, $db, $dir, @{ $g->{run} });
		is($rc, 0, "$name: @{ $g->{run} } runs") or diag("stdout:\n$out\nstderr:\n$err");
		like($out, qr/^\Q$g->{ok}\E: ok$/m, "$name: $g->{ok} checked everything it shows");
	}

	# what the migrations made, seen from the server
	for my $t (@{ $g->{tables} })
	{
		is($node->safe_psql($db,
				"SELECT pg_get_expr(d.adbin, d.adrelid) || ' ' || a.attidentity::text || "
				  . "coalesce(pg_get_serial_sequence('$t', 'id'), 'no sequence') "
				  . "FROM pg_attribute a JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
				  . "WHERE a.attrelid = '$t'::regclass AND a.attname = 'id'"),
			'snowseq_next() no sequence', "$name: $t.id takes snowseq_next(), no sequence left");
		is($node->safe_psql($db,
				"SELECT count(*) > 0 AND bool_and(id > 2^40 AND (snowseq_parse(id)).node = 1) FROM $t"),
			't', "$name: $t holds snowflake IDs of this node");
	}
	if ($name eq 'hibernate')
	{
		is($node->safe_psql($db,
				"SELECT count(*) FROM pg_attrdef WHERE adrelid = 'invoices'::regclass")
			  . ' ' . $node->safe_psql($db, "SELECT to_regclass('invoices_seq') IS NOT NULL"),
			'0 t', 'hibernate: the SEQUENCE table and its sequence are left as they are');
	}
	$node->safe_psql('postgres', "DROP DATABASE $db");
}

# CREATE EXTENSION in a database with auto_keys on: an extension's tables
# change only with it (snowseq's fence table has an integer identity key,
# which would be refused; its other keys stay identities)
$node->safe_psql('postgres', 'CREATE DATABASE ext_on');
$node->safe_psql('postgres', 'ALTER DATABASE ext_on SET snowseq.auto_keys = on');
my ($rc, $out, $err) = $node->psql('ext_on', 'CREATE EXTENSION snowseq');
is($rc, 0, 'CREATE EXTENSION snowseq with auto_keys on succeeds') or diag($err);
is($node->safe_psql('ext_on',
		"SELECT string_agg(attidentity, '' ORDER BY attrelid::regclass::text) FROM pg_attribute "
		  . "WHERE (attrelid, attname) IN (('snowseq_moves'::regclass, 'move_id'), ('snowseq_fence'::regclass, 'fence_id'))"),
	'aa', "the extension's identity keys are left as they are");

# a database without snowseq: its DDL is left as it is, integer keys too
$node->safe_psql('postgres', 'CREATE DATABASE no_snowseq OWNER app');
$node->safe_psql('postgres', 'ALTER DATABASE no_snowseq SET snowseq.auto_keys = on');
($rc, $out, $err) = $node->psql('no_snowseq',
	'CREATE TABLE a (id serial PRIMARY KEY); CREATE TABLE b (id bigserial PRIMARY KEY)',
	extra_params => [ '-U', 'app' ]);
is($rc, 0, 'a database without snowseq makes integer keys with auto_keys on') or diag($err);
is($node->safe_psql('no_snowseq',
		"SELECT pg_get_serial_sequence('a', 'id') || ' ' || pg_get_serial_sequence('b', 'id')"),
	'public.a_id_seq public.b_id_seq', 'and its bigserial keeps its sequence');

$node->stop;
done_testing();
