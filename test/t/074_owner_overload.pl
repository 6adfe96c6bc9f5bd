# The database owner's overloads.  On PostgreSQL 15 and later the database
# owner owns public, where a plain CREATE EXTENSION installs snowseq.  A
# function of the exact argument types wins over one reached through an
# implicit cast, so a snowseq_gene_next(integer) it created in public ran
# for a superuser's snowseq_gene_next(uid) on an integer column, with the
# superuser's rights.  Here the database owner (not a superuser) plants an
# overload for every key function and every argument type callers pass
# most (integer, smallint, varchar, char(n), name); each planted function
# records that it ran, and as whom.  A superuser's calls on columns and
# literals of those types must never run one, and must give what the key
# cast to bigint or text gives.  The overloads that prevent it mirror their
# main function (markings, comment, rights).  Installing or updating into a
# schema that a role other than a superuser may create in WARNs, naming
# those roles; a schema only superusers create in does not, and there,
# first on the search path, it wins over an overload planted in public.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $node = snowseq_node('owner', extension => 0);
sub su { return $node->safe_psql(@_); }

# Run sql in db as role dbo; returns (exit code, stdout, stderr).
sub as_dbo
{
	my ($db, $sql) = @_;
	my ($out, $err) = ('', '');
	my $rc = $node->psql($db, $sql, stdout => \$out, stderr => \$err,
		extra_params => [ '-U', 'dbo' ]);
	return ($rc, $out, $err);
}

my @functions = (
	[ 'snowseq_gene', 'integer' ],
	[ 'snowseq_gene_next', 'bigint' ],
	[ 'snowseq_gene_uuid', 'uuid' ],
	[ 'snowseq_key_range', 'int8range' ],
	[ 'snowseq_route_key', 'text' ]);
# argument type => (column of the table users, the type the main function takes)
my %types = (
	integer => [ 'uid', 'bigint' ],
	smallint => [ 'small', 'bigint' ],
	varchar => [ 'email', 'text' ],
	bpchar => [ 'code', 'text' ],
	name => [ 'nm', 'text' ]);

su('postgres', 'CREATE ROLE dbo LOGIN');
su('postgres', 'CREATE DATABASE app OWNER dbo');

# ---- CREATE EXTENSION into public, which dbo owns (pg_database_owner) ----
my ($rc, $out, $err) = $node->psql('app', 'CREATE EXTENSION snowseq');
is($rc, 0, 'CREATE EXTENSION into public of a database a non-superuser owns succeeds');
like($err, qr/WARNING:  schema public of extension snowseq lets roles that are not superusers create objects in it: dbo\n/,
	'it WARNs, naming the database owner');
like($err, qr/HINT:  Install snowseq into a schema only superusers can create in \(CREATE SCHEMA snowseq; CREATE EXTENSION snowseq SCHEMA snowseq\)/,
	'the hint says where to install');

# ---- the database owner plants an overload of each type ----
as_dbo('app', 'CREATE TABLE public.planted (fn text, ran_as text, superuser text); GRANT INSERT ON public.planted TO PUBLIC');
my $planted = 0;
for my $f (@functions)
{
	my ($name, $ret) = @$f;
	for my $t (sort keys %types)
	{
		my ($prc, undef, $perr) = as_dbo('app', qq{
			CREATE FUNCTION public.$name(key $t) RETURNS $ret LANGUAGE plpgsql AS \$\$
			BEGIN
				INSERT INTO public.planted VALUES ('$name($t)', current_user, current_setting('is_superuser'));
				RETURN NULL;
			END \$\$});
		$planted++ if $prc == 0;
		like($perr, qr/function "$name" already exists with same argument types/,
			"the database owner cannot create public.$name($t)");
	}
}
($rc, undef, $err) = as_dbo('app', q{
	CREATE OR REPLACE FUNCTION public.snowseq_gene_next(key integer) RETURNS bigint
		LANGUAGE sql AS 'SELECT 1::bigint'});
isnt($rc, 0, 'nor replace snowseq_gene_next(integer)');
note("overloads the database owner planted: $planted");

# ---- a superuser's calls on columns and literals of those types ----
su('app', q{
	CREATE TABLE public.users (uid integer, small smallint, email varchar(40), code char(8), nm name);
	INSERT INTO snowseq_shard_map VALUES (16383, 's1'), (32767, 's2');
	INSERT INTO public.users VALUES (42, 7, 'alice@example.com', 'ab', 'carol'),
		(-2147483648, -32768, '', '', '')});
for my $t (sort keys %types)
{
	my ($col, $main) = @{ $types{$t} };
	is(su('app', qq{
		SELECT count(*) FILTER (WHERE snowseq_gene($col) = snowseq_gene(${col}::$main)
				AND snowseq_key_range($col) = snowseq_key_range(${col}::$main)
				AND snowseq_route_key($col) IS NOT DISTINCT FROM snowseq_route_key(${col}::$main)
				AND shard_of(snowseq_gene_next($col)) = snowseq_gene(${col}::$main)
				AND shard_of(snowseq_gene_uuid($col)) >> 8 = snowseq_gene(${col}::$main))
		FROM public.users}), '2',
		"a $t column: every key function gives what the key as $main gives");
}
is(su('app', q{
	SELECT shard_of(snowseq_gene_next(42)) = snowseq_gene(42::bigint)
		AND snowseq_gene(7::smallint) = snowseq_gene(7::bigint)
		AND snowseq_gene('ab'::char(8)) = snowseq_gene('ab')
		AND snowseq_key_range(42) = snowseq_key_range(42::bigint)
		AND shard_of(snowseq_gene_uuid('alice')) >> 8 = snowseq_gene('alice'::text)}), 't',
	'integer, smallint and char literals give what bigint and text give');
is(su('app', q{SELECT 'alice'::varchar, snowseq_gene('alice'::varchar) = snowseq_gene('alice'::text)}), "alice|t",
	'a varchar key hashes as the same text');
($rc, undef, $err) = $node->psql('app', 'SELECT snowseq_gene_next(NULL::integer)');
like($err, qr/ERROR:  the key of snowseq_gene_next\(\) must not be NULL/, 'a NULL integer key is an ERROR, as a NULL bigint key');
($rc, undef, $err) = $node->psql('app', 'SELECT snowseq_gene_uuid(NULL::name)');
like($err, qr/ERROR:  the key of snowseq_gene_uuid\(\) must not be NULL/, 'a NULL name key is an ERROR, as a NULL text key');
is(su('app', 'SELECT count(*) FROM public.planted'), '0', 'no planted function ran for the superuser');

# ---- each overload mirrors its main function ----
my $mirror = qq{
	SELECT o.oid::regprocedure, m.oid::regprocedure
	FROM pg_proc o
	JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = o.oid AND d.deptype = 'e'
		AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'snowseq')
	JOIN pg_proc m ON m.proname = o.proname AND m.pronamespace = o.pronamespace
		AND m.proargtypes[0] = CASE WHEN o.proargtypes[0] IN ('integer'::regtype, 'smallint'::regtype)
			THEN 'bigint'::regtype ELSE 'text'::regtype END
	WHERE o.pronargs = 1
	  AND o.proargtypes[0] IN ('integer'::regtype, 'smallint'::regtype, 'varchar'::regtype, 'bpchar'::regtype, 'name'::regtype)
	  AND o.proname IN ('snowseq_gene', 'snowseq_gene_next', 'snowseq_gene_uuid', 'snowseq_key_range', 'snowseq_route_key')};
is(su('app', "SELECT count(*) FROM ($mirror) x"), scalar(@functions) * scalar(keys %types),
	'every key function has an overload of each type');
is(su('app', qq{
	SELECT string_agg(x.o::text, ', ')
	FROM ($mirror) x(o, m)
	JOIN pg_proc po ON po.oid = x.o
	JOIN pg_proc pm ON pm.oid = x.m
	WHERE (po.provolatile, po.proisstrict, po.proparallel, po.prorettype, po.prolang, coalesce(po.proacl::text, ''))
		IS DISTINCT FROM (pm.provolatile, pm.proisstrict, pm.proparallel, pm.prorettype, pm.prolang, coalesce(pm.proacl::text, ''))
	   OR obj_description(po.oid, 'pg_proc') IS NULL}), '',
	'every overload has its main function markings, language, result, rights and a comment');

# ---- the database owner can drop public, and snowseq with it ----
($rc, undef, $err) = as_dbo('app', 'DROP SCHEMA public CASCADE');
is($rc, 0, 'the database owner drops public, and snowseq installed there, with CASCADE') or diag($err);
is(su('app', q{SELECT count(*) FROM pg_extension WHERE extname = 'snowseq'}), '0', 'snowseq is gone from that database');

# ---- a schema only superusers create in: no WARNING, and it wins there ----
su('postgres', 'CREATE DATABASE app2 OWNER dbo');
($rc, undef, $err) = $node->psql('app2', 'CREATE SCHEMA snowseq; CREATE EXTENSION snowseq SCHEMA snowseq');
is($rc, 0, 'CREATE EXTENSION into a schema of its own');
unlike($err, qr/WARNING/, 'no WARNING for a schema only superusers create in');
as_dbo('app2', q{
	CREATE TABLE public.planted (fn text, ran_as text, superuser text);
	GRANT INSERT ON public.planted TO PUBLIC;
	CREATE FUNCTION public.snowseq_gene_next(key integer) RETURNS bigint LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO public.planted VALUES ('snowseq_gene_next(integer)', current_user, current_setting('is_superuser'));
		RETURN NULL;
	END $$});
is(su('app2', q{
	CREATE TABLE public.users (uid integer);
	INSERT INTO public.users VALUES (42);
	SET search_path = snowseq, public;
	SELECT shard_of(snowseq_gene_next(uid)) = snowseq_gene(uid::bigint) FROM public.users;
	SELECT snowseq.shard_of(snowseq.snowseq_gene_next(uid)) = snowseq.snowseq_gene(uid::bigint) FROM public.users}), "t\nt",
	'snowseq first on the search path, or qualified: its own overload, not the one planted in public');
is(su('app2', 'SELECT count(*) FROM public.planted'), '0', 'the planted function never ran');

# ---- ALTER EXTENSION UPDATE into a writable public WARNs too ----
su('postgres', 'CREATE DATABASE app3 OWNER dbo');
su('app3', q{CREATE EXTENSION snowseq VERSION '1.2'});
($rc, undef, $err) = $node->psql('app3', 'ALTER EXTENSION snowseq UPDATE');
is($rc, 0, 'ALTER EXTENSION UPDATE from 1.2 in public succeeds');
like($err, qr/WARNING:  schema public of extension snowseq lets roles that are not superusers create objects in it: dbo\n/,
	'and WARNs');
is(su('app3', q{SELECT count(*) FROM pg_proc WHERE proname = 'snowseq_gene_next'
	AND pronamespace = 'public'::regnamespace}), '8', 'the update adds the overloads');

# ---- CREATE granted to PUBLIC on a superuser's schema; a superuser's public ----
su('postgres', 'CREATE DATABASE app4');
($rc, undef, $err) = $node->psql('app4', 'CREATE SCHEMA ids; GRANT CREATE ON SCHEMA ids TO PUBLIC; CREATE EXTENSION snowseq SCHEMA ids');
like($err, qr/WARNING:  schema ids of extension snowseq lets roles that are not superusers create objects in it: PUBLIC, dbo\n/,
	'CREATE granted to PUBLIC WARNs, naming PUBLIC');
($rc, undef, $err) = $node->psql('postgres', 'CREATE EXTENSION snowseq');
is($rc, 0, 'CREATE EXTENSION into public of a database a superuser owns');
unlike($err, qr/WARNING/, 'no WARNING: only superusers create in that public');

$node->stop;
done_testing();
