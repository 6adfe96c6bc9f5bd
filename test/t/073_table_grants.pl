# Grants on snowseq's own tables (docs/security.md, "A grantee of snowseq's
# tables"): snowseq writes them as their owner, so a trigger another role
# put on one of them would run as that owner inside snowseq's writes.  A role
# granted TRIGGER, by a plain grant, by GRANT ALL ON ALL TABLES IN SCHEMA or
# by default privileges set before CREATE EXTENSION, cannot create one, and
# its trigger never fires as the owner: it stays an ordinary role through
# counter creation, a new key and a record written by a SECURITY DEFINER
# record function.  A REFERENCES grantee cannot pin rows with a foreign key;
# TRUNCATE, UPDATE and (17 and later) MAINTAIN grantees cannot wipe the
# records or hold locks on the tables that block snowseq's writes.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $node = snowseq_node('grants', extension => 0);
my $OWNED = qr/snowseq writes it as its owner/;

$node->safe_psql('postgres', q{
	CREATE ROLE regress_app LOGIN;
	CREATE ROLE regress_plain LOGIN;
	CREATE ROLE regress_schema LOGIN;
	CREATE ROLE regress_default LOGIN;
	CREATE ROLE regress_refs LOGIN;
	CREATE ROLE regress_trunc LOGIN;
	CREATE ROLE regress_maint LOGIN;
	CREATE DATABASE plain;
	CREATE DATABASE inschema;
	CREATE DATABASE defaults;
});

# The three routes to TRIGGER on snowseq's tables, one database and one role each.
my %route = (
	plain => [ 'regress_plain', '', q{GRANT TRIGGER ON snowseq_counters, snowseq_key_store,
		snowseq_rebalance_runs TO regress_plain} ],
	inschema => [ 'regress_schema', '', 'GRANT ALL ON ALL TABLES IN SCHEMA public TO regress_schema' ],
	defaults => [ 'regress_default', 'ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO regress_default', '' ],
);
for my $db (sort keys %route)
{
	my ($r, $before, $after) = @{ $route{$db} };
	$node->safe_psql($db, $before) if $before;
	$node->safe_psql($db, 'CREATE EXTENSION snowseq');
	$node->safe_psql($db, $after) if $after;
	is($node->safe_psql($db, "SELECT pg_catalog.has_table_privilege('$r', 'snowseq_counters', 'TRIGGER')"),
		't', "$db: $r holds TRIGGER on snowseq_counters");
	# The role's trigger function records where it ran and as whom, and
	# tries to make its role a superuser.
	$node->safe_psql($db, qq{
		CREATE TABLE public.fired (tbl text, as_role text);
		GRANT INSERT ON public.fired TO PUBLIC;
		CREATE SCHEMA $r AUTHORIZATION $r;
		CREATE TABLE public.app_t (id bigint);
		ALTER TABLE public.app_t OWNER TO regress_app;
		GRANT EXECUTE ON FUNCTION snowseq_create_counter(text, bigint, integer, boolean, bigint),
			snowseq_new_key(integer), snowseq_rebalance_save_run(snowseq_rebalance_runs, boolean)
			TO regress_app;
	});
	$node->safe_psql($db, qq{
		CREATE FUNCTION $r.grab() RETURNS trigger LANGUAGE plpgsql AS \$g\$
		BEGIN
			INSERT INTO public.fired VALUES (TG_TABLE_NAME, current_user);
			BEGIN
				EXECUTE 'ALTER ROLE $r SUPERUSER';
			EXCEPTION WHEN OTHERS THEN NULL;
			END;
			RETURN NEW;
		END \$g\$;
	}, extra_params => [ '-U', $r ]);
	for my $t ('snowseq_counters', 'snowseq_key_store', 'snowseq_rebalance_runs')
	{
		my ($rc, $out, $err) = $node->psql($db,
			"CREATE TRIGGER grab BEFORE INSERT OR UPDATE ON public.$t FOR EACH ROW EXECUTE FUNCTION $r.grab()",
			extra_params => [ '-U', $r ]);
		isnt($rc, 0, "$db: $r cannot create a trigger on $t");
		like($err, $OWNED, "$db: the refusal says why ($t)");
	}
	# snowseq's writes as the tables' owner, by an ordinary role.
	$node->safe_psql($db, q{
		SELECT snowseq_create_counter('app_counter');
		SELECT snowseq_new_key();
		SELECT (snowseq_rebalance_save_run(pg_catalog.jsonb_populate_record(NULL::snowseq_rebalance_runs,
			'{"parent": "app_t", "strategy": "greedy", "threshold": 0.1, "drain": [], "fill": [], "sample": "10 s", "merge_below": 0, "state": "done"}'))).run_id;
	}, extra_params => [ '-U', 'regress_app' ]);
	is($node->safe_psql($db, 'SELECT pg_catalog.count(*) FROM public.fired'), '0',
		"$db: no trigger of $r fired in snowseq's writes");
	is($node->safe_psql('postgres', "SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = '$r'"),
		'f', "$db: $r is still an ordinary role");
}

# The extension's owner (here a superuser) still administers its tables.
$node->safe_psql('plain', q{
	CREATE FUNCTION public.noop() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
	CREATE TRIGGER noop BEFORE INSERT ON snowseq_counters FOR EACH ROW EXECUTE FUNCTION public.noop();
	DROP TRIGGER noop ON snowseq_counters;
	BEGIN; LOCK TABLE snowseq_counters IN ACCESS EXCLUSIVE MODE; COMMIT;
});
pass('the owner creates a trigger on and locks snowseq_counters');

# REFERENCES: no foreign key, so no row of snowseq's tables pinned or locked.
$node->safe_psql('plain', q{
	GRANT REFERENCES ON snowseq_counters, snowseq_rebalance_runs TO regress_refs;
	CREATE SCHEMA regress_refs AUTHORIZATION regress_refs;
});
for my $sql ('CREATE TABLE regress_refs.pin (name text REFERENCES public.snowseq_counters (name))',
	'CREATE TABLE regress_refs.pin2 (run bigint); '
	. 'ALTER TABLE regress_refs.pin2 ADD FOREIGN KEY (run) REFERENCES public.snowseq_rebalance_runs (run_id)')
{
	my ($rc, $out, $err) = $node->psql('plain', $sql, extra_params => [ '-U', 'regress_refs' ]);
	isnt($rc, 0, "REFERENCES grantee: refused: $sql");
	like($err, $OWNED, 'REFERENCES grantee: the refusal says why');
}
is($node->safe_psql('plain', q{SELECT pg_catalog.count(*) FROM pg_catalog.pg_constraint
	WHERE contype = 'f' AND connamespace = 'regress_refs'::regnamespace}),
	'0', 'REFERENCES grantee: no foreign key of its own references snowseq\'s tables');

# TRUNCATE and UPDATE: no wiping, no lock stronger than a write's, no row
# locks (UPDATE allows SELECT ... FOR UPDATE, which the guard does not see).
$node->safe_psql('plain', q{GRANT SELECT, UPDATE, TRUNCATE ON snowseq_counters, snowseq_rebalance_runs
	TO regress_trunc});
my $before = $node->safe_psql('plain', 'SELECT pg_catalog.count(*) FROM snowseq_counters');
for my $t ('snowseq_counters', 'snowseq_rebalance_runs')
{
	my ($rc, $out, $err) = $node->psql('plain', "TRUNCATE $t", extra_params => [ '-U', 'regress_trunc' ]);
	isnt($rc, 0, "TRUNCATE grantee: TRUNCATE $t refused");
	for my $mode ('SHARE', 'SHARE ROW EXCLUSIVE', 'EXCLUSIVE', 'ACCESS EXCLUSIVE')
	{
		($rc, $out, $err) = $node->psql('plain', "BEGIN; LOCK TABLE $t IN $mode MODE; COMMIT",
			extra_params => [ '-U', 'regress_trunc' ]);
		like($err, $OWNED, "TRUNCATE grantee: LOCK TABLE $t IN $mode MODE refused");
	}
}
for my $lock ('UPDATE', 'NO KEY UPDATE', 'SHARE', 'KEY SHARE')
{
	my ($rc, $out, $err) = $node->psql('plain', "BEGIN; SELECT name FROM snowseq_counters FOR $lock; COMMIT",
		extra_params => [ '-U', 'regress_trunc' ]);
	like($err, $OWNED, "UPDATE grantee: SELECT ... FOR $lock of snowseq_counters refused");
}
is($node->safe_psql('plain', 'SELECT pg_catalog.count(*) FROM snowseq_counters'), $before,
	'TRUNCATE grantee: the definitions are all there');
$node->safe_psql('plain', 'BEGIN; LOCK TABLE snowseq_counters IN ROW EXCLUSIVE MODE; COMMIT',
	extra_params => [ '-U', 'regress_trunc' ]);
pass('a lock no stronger than a write\'s is still taken');

SKIP:
{
	skip 'MAINTAIN is a privilege from PostgreSQL 17 on', 6
	  if $node->safe_psql('postgres', 'SHOW server_version_num') < 170000;
	$node->safe_psql('plain', 'GRANT MAINTAIN ON snowseq_counters TO regress_maint');
	for my $sql ('BEGIN; LOCK TABLE snowseq_counters IN ACCESS EXCLUSIVE MODE; COMMIT',
		'BEGIN; CLUSTER snowseq_counters USING snowseq_counters_pkey; COMMIT',
		'BEGIN; REINDEX TABLE snowseq_counters; COMMIT',
		'BEGIN; REINDEX INDEX snowseq_counters_pkey; COMMIT')
	{
		my ($rc, $out, $err) = $node->psql('plain', $sql, extra_params => [ '-U', 'regress_maint' ]);
		like($err, $OWNED, "MAINTAIN grantee: refused: $sql");
	}
	if ($node->safe_psql('postgres', 'SHOW server_version_num') >= 190000)
	{
		my ($rc, $out, $err) = $node->psql('plain', 'REPACK snowseq_counters', extra_params => [ '-U', 'regress_maint' ]);
		like($err, qr/cannot repack table snowseq_counters: snowseq writes it as its owner/,
			'MAINTAIN grantee: refused: REPACK (PostgreSQL 19)');
	}
	$node->safe_psql('plain', 'VACUUM snowseq_counters', extra_params => [ '-U', 'regress_maint' ]);
	pass('MAINTAIN grantee: VACUUM, which holds no lock past itself, still runs');
	# no transaction block holds VACUUM FULL's lock
	$node->safe_psql('plain', 'VACUUM FULL snowseq_counters', extra_params => [ '-U', 'regress_maint' ]);
	pass('MAINTAIN grantee: VACUUM FULL, which runs in no transaction block, still runs');
}

$node->stop;
done_testing();
