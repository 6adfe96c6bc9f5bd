# The lifecycle matrix: every durable object of snowseq against every event
# of its life.  Each cell is a check run here (no value a client received is
# issued again; the object is usable afterwards) or the reason it cannot
# apply / the test that covers it.  Key versions have their own matrix
# (071).  The table below is also the data that drives the test
# (%MATRIX): a cell 'check' runs, any other text is its reason.
#
#                | txn  | save-| drop+  | DROP/  | DROP/  | clean | crash | promo-| dump/   | dump/   | dump     | dump  | dump     | pg_     | period | key
#                | roll-| point| re-    | CREATE | CREATE | re-   |       | tion  | restore | restore | --data-  | -t    | --exclu- | upgrade | switch | rota-
#                | back | roll-| create | EXTEN- | DATA-  | start |       |       | same    | other   | only     |       | de-      |         |        | tion
#                |      | back |        | SION   | BASE   |       |       |       | cluster | cluster |          |       | schema   |         |        |
# ---------------+------+------+--------+--------+--------+-------+-------+-------+---------+---------+----------+-------+----------+---------+--------+------
# clock          | ck   | ck   | n/a 1  | ck     | ck     | ck    | ck    | ck    | ck      | ck      | ck       | ck    | ck       | 061     | 003 2  | n/a 3
# gene segments  | ck   | ck   | n/a 1  | ck     | ck     | ck    | ck    | ck    | ck      | ck      | ck       | ck    | ck       | 061     | n/a 4  | n/a 3
# named counter  | ck   | ck   | ck     | ck     | ck 5   | ck    | ck    | ck    | ck      | ck      | ck 9     | ck 9  | ck 9     | 061     | n/a 4  | n/a 3
# serial         | ck   | ck   | ck     | ck     | ck 5   | ck    | ck    | ck    | ck      | ck      | ck 9     | ck 9  | ck 9     | 061     | 016 018| n/a 3
# routing map    | ck   | ck   | ck     | ck     | ck     | ck    | ck    | ck    | ck      | ck      | ck       | ck    | ck       | 061     | n/a 4  | n/a 3
# move record    | 040  | 040  | 040    | n/a 6  | n/a 6  | 040   | 040   | 040 7 | n/a 8   | n/a 8   | n/a 8    | n/a 8 | n/a 8    | n/a 8   | n/a 4  | n/a 3
#
# ck: checked here.  0NN: covered by test/t/0NN_*.pl.  Notes: 1 the clock and
# the gene segment counter belong to the cluster (its node id), not to an SQL
# object that could be dropped; 2 a period of the clock is a clock step,
# 003_clock_step.pl; 3 no object here uses a key; 4 only serials have
# periods; 5 a database created anew is a new database: its counters start
# anew, the old database and every row holding its values are gone; checked
# here: usable, nothing twice within the new database, its places free;
# 6 a move record lives in the router's snowseq_moves and its replication
# objects, taken down with the move; 7 040_move.pl restarts the router
# during the copy; promotion of a router is a restart for the record; 8 a
# finished move leaves no record; a running one holds replication slots,
# which pg_dump and pg_upgrade do not carry (PostgreSQL refuses to upgrade
# with them); 9 a partial dump restored into a database of its own: with
# --data-only (restored after CREATE EXTENSION) the counters' floors come
# back with their values and the counters continue above them; with -t
# snowseq_counters or --exclude-schema snowseq_state the definitions come
# back without their record, and the counters are refused (checked) until
# snowseq_counter_raise() says where they stood, then continue above it.
#
# Whatever a client received counts as issued, even in a transaction rolled
# back: every value is read from psql's output and kept here, and the union
# is checked for duplicates after every event.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $tmp = $PostgreSQL::Test::Utils::tmp_check;

my @EVENTS = ('transaction rollback', 'savepoint rollback', 'drop and re-create',
	'DROP/CREATE EXTENSION', 'DROP/CREATE DATABASE', 'clean restart', 'crash', 'promotion',
	'dump/restore same cluster', 'dump/restore other cluster', 'dump --data-only', 'dump -t',
	'dump --exclude-schema', 'pg_upgrade', 'period switch', 'key rotation');
my @OBJECTS = ('clock', 'gene segments', 'named counter', 'serial', 'routing map', 'move record');

my %N = (
	cluster => 'n/a: the clock and the gene segment counter belong to the cluster, not to an SQL object',
	upgrade => 'covered: 061_pg_upgrade.pl',
	nokey   => 'n/a: no object here uses a key (keys have their own matrix, 071)',
	noperiod => 'n/a: only serials have periods',
	move    => 'covered: 040_move.pl',
	moveobj => 'n/a: a move record lives in the router\'s snowseq_moves with its replication objects, taken down with the move',
	movedump => 'n/a: a finished move leaves no record; a running one holds replication slots, which pg_dump and pg_upgrade do not carry',
);
my %MATRIX;
for my $o ('clock', 'gene segments', 'named counter', 'serial', 'routing map')
{
	$MATRIX{$o}{$_} = 'check' for @EVENTS;
	$MATRIX{$o}{'pg_upgrade'} = $N{upgrade};
	$MATRIX{$o}{'key rotation'} = $N{nokey};
	$MATRIX{$o}{'period switch'} = $N{noperiod};
}
$MATRIX{$_}{'drop and re-create'} = $N{cluster} for ('clock', 'gene segments');
$MATRIX{clock}{'period switch'} = 'covered: a period of the clock is a clock step, 003_clock_step.pl';
$MATRIX{serial}{'period switch'} = 'covered: 016_counters.pl (midnight) and 018_counter_life.pl (midnight, then restart and crash)';
$MATRIX{'move record'} = {
	'transaction rollback' => $N{move} . ' (a cancelled move leaves the old placement serving)',
	'savepoint rollback' => $N{move} . ' (a cancelled move)',
	'drop and re-create' => $N{move} . ' (a retried move after a failed one)',
	'DROP/CREATE EXTENSION' => $N{moveobj},
	'DROP/CREATE DATABASE' => $N{moveobj},
	'clean restart' => $N{move} . ' (the router restarted during the copy)',
	'crash' => $N{move} . ' (a destination stopped during the copy)',
	'promotion' => $N{move} . ' (promotion of a router is a restart for the record)',
	'dump/restore same cluster' => $N{movedump},
	'dump/restore other cluster' => $N{movedump},
	'dump --data-only' => $N{movedump},
	'dump -t' => $N{movedump},
	'dump --exclude-schema' => $N{movedump},
	'pg_upgrade' => $N{movedump},
	'period switch' => $N{noperiod},
	'key rotation' => $N{nokey},
};

# every cell is a check or a reason
for my $o (@OBJECTS)
{
	for my $e (@EVENTS)
	{
		my $c = $MATRIX{$o}{$e} // '';
		ok($c eq 'check' || $c =~ /^(n\/a|covered): ./, "matrix: $o x $e has a check or a reason");
	}
}

sub lines { return grep { length } split /\n/, $_[0]; }

# What each object takes, its setup in a database, and its map check.
my $MAP_ROWS = "INSERT INTO snowseq_shard_map VALUES (16383, 'a'), (32767, 'b')";
my $MAP_CHECK = "SELECT string_agg(snowseq_route_gene(g), ',' ORDER BY g) FROM unnest(ARRAY[0, 16383, 16384, 32767]) g";
my %TAKE = (
	'clock' => "SELECT snowseq_next() FROM generate_series(1, 300)",
	'gene segments' => "SELECT snowseq_gene_next('key' || i) FROM generate_series(1, 300) i",
	'named counter' => "SELECT snowseq_counter_next('lc') FROM generate_series(1, 300)",
	'serial' => "SELECT snowseq_serial('ls') FROM generate_series(1, 300)",
);
my %CREATE = (
	'named counter' => "SELECT snowseq_create_counter('lc', start => 10)",
	'serial' => "SELECT snowseq_create_serial('ls', 'L-YYYY-##########')",
	'routing map' => $MAP_ROWS,
);
my %DROP = (
	'named counter' => "SELECT snowseq_drop_counter('lc')",
	'serial' => "SELECT snowseq_drop_counter('ls')",
	'routing map' => 'DELETE FROM snowseq_shard_map',
);

# Values received, by object and scope: the clock's and the gene
# segments' are the cluster's (the other cluster has another node id), a
# counter's are its database's (a restored copy continues the same counter).
my %seen;
my %scope = ('clock' => 'node', 'gene segments' => 'node', 'named counter' => 'life', 'serial' => 'life');
my %checked;

# Record what a client received and check the union for duplicates.
sub received
{
	my ($o, $event, @v) = @_;
	my $s = $seen{$o}{ $scope{$o} } //= {};
	my @dup = grep { $s->{$_}++ } @v;
	ok(@v > 0 && !@dup, "$o x $event: " . scalar(@v) . ' values received, none issued before' .
		(@dup ? " (repeated: @dup[0 .. ($#dup < 2 ? $#dup : 2)])" : ''));
}

# The check of one cell: the object is usable and issues nothing twice.  An
# event that is no column of the matrix (the setup, the primary before its
# stop) takes values all the same.
sub check_cell
{
	my ($node, $db, $o, $event) = @_;
	if (exists $MATRIX{$o}{$event})
	{
		return unless $MATRIX{$o}{$event} eq 'check';
		$checked{"$o x $event"}++;
	}
	return if $o eq 'move record';
	if ($o eq 'routing map')
	{
		is($node->safe_psql($db, $MAP_CHECK), 'a,a,b,b', "$o x $event: the map routes every gene as its rows say");
		return;
	}
	received($o, $event, lines($node->safe_psql($db, $TAKE{$o})));
}

sub check_all
{
	my ($node, $db, $event) = @_;
	check_cell($node, $db, $_, $event) for @OBJECTS;
}

sub setup_all
{
	my ($node, $db) = @_;
	$node->safe_psql($db, join(";\n", map { $CREATE{$_} } ('named counter', 'serial', 'routing map')));
}

my $node = snowseq_node('life', node_id => 1, streaming => 1, conf => [ "timezone = 'UTC'" ]);
$node->safe_psql('postgres', 'CREATE DATABASE life');
$node->safe_psql('life', 'CREATE EXTENSION snowseq');
setup_all($node, 'life');
check_all($node, 'life', 'setup');

# transaction and savepoint rollback: what the rolled-back transaction
# received counts as issued
for my $o (@OBJECTS)
{
	next unless ($MATRIX{$o}{'transaction rollback'} // '') eq 'check';
	if ($o eq 'routing map')
	{
		$node->safe_psql('life', "BEGIN; UPDATE snowseq_shard_map SET shard = 'x'; ROLLBACK");
		$node->safe_psql('life', "BEGIN; SAVEPOINT s; DELETE FROM snowseq_shard_map; ROLLBACK TO SAVEPOINT s; COMMIT");
	}
	else
	{
		received($o, 'transaction rollback (inside)', lines($node->safe_psql('life', "BEGIN; $TAKE{$o}; ROLLBACK")));
		received($o, 'savepoint rollback (inside)',
			lines($node->safe_psql('life', "BEGIN; SAVEPOINT s; $TAKE{$o}; ROLLBACK TO SAVEPOINT s; COMMIT")));
	}
}
check_all($node, 'life', 'transaction rollback');
check_all($node, 'life', 'savepoint rollback');

# drop and re-create each object that can be dropped, with its definition
for my $o (@OBJECTS)
{
	next unless ($MATRIX{$o}{'drop and re-create'} // '') eq 'check';
	$node->safe_psql('life', "$DROP{$o}; $CREATE{$o}");
}
check_all($node, 'life', 'drop and re-create');

# DROP EXTENSION takes the definitions and the map; re-created, the objects
# continue
$node->safe_psql('life', 'DROP EXTENSION snowseq; CREATE EXTENSION snowseq');
setup_all($node, 'life');
check_all($node, 'life', 'DROP/CREATE EXTENSION');

$node->restart;
check_all($node, 'life', 'clean restart');

$node->stop('immediate');
$node->start;
check_all($node, 'life', 'crash');

# promotion: values taken on the primary up to its immediate stop, then on
# the promoted standby
$node->backup('life_backup');
my $standby = PostgreSQL::Test::Cluster->new('life_standby');
$standby->init_from_backup($node, 'life_backup', has_streaming => 1);
$standby->start;
check_all($node, 'life', 'promotion (primary before)');
$node->stop('immediate');
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die 'standby not promoted';
$node = $standby;
check_all($node, 'life', 'promotion');

# dump/restore into the same cluster: the copy continues the counters
# above everything the source issued (each copy of one dump goes on from
# there on its own, as copies of a sequence do)
my $dump = "$tmp/life.dump";
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('life') ], 'pg_dump of the database');
for my $o ('named counter', 'serial')
{
	$seen{$o}{$_} = { %{ $seen{$o}{life} } } for ('copy', 'other');
}
$node->safe_psql('postgres', 'CREATE DATABASE life_copy');
$node->command_ok([ 'pg_restore', '-d', $node->connstr('life_copy'), $dump ], 'pg_restore into the same cluster');
$scope{'named counter'} = $scope{'serial'} = 'copy';
check_all($node, 'life_copy', 'dump/restore same cluster');
$scope{'named counter'} = $scope{'serial'} = 'other';

# and into another cluster, node 2
my $other = snowseq_node('life_other', node_id => 2, extension => 0, conf => [ "timezone = 'UTC'" ]);
$other->safe_psql('postgres', 'CREATE DATABASE life');
$other->command_ok([ 'pg_restore', '-d', $other->connstr('life'), $dump ], 'pg_restore into another cluster');
check_all($other, 'life', 'dump/restore other cluster');

# Partial dumps, each restored into a database of its own on the other
# cluster: what comes back continues above the source, or is refused until
# told where the source stood (note 9).  The last value of each counter a
# client received is what an operator reads from the rows the source wrote.
sub last_received
{
	my ($o) = @_;
	my @v = keys %{ $seen{$o}{life} };
	if ($o eq 'serial')
	{
		@v = map { /(\d+)$/ ? $1 + 0 : () } @v;
	}
	my ($max) = sort { $b <=> $a } @v;
	return $max;
}
my %PARTIAL = (
	'dump --data-only' => { opts => ['--data-only'], extension_first => 1, recorded => 1 },
	'dump -t' => { opts => [ '-t', 'snowseq_counters', '-t', 'snowseq_shard_map' ], extension_first => 1,
		recorded => 0 },
	'dump --exclude-schema' => { opts => [ '--exclude-schema', 'snowseq_state' ], extension_first => 0,
		recorded => 0 },
);
my %NAME = ('named counter' => 'lc', 'serial' => 'ls');
for my $event (sort keys %PARTIAL)
{
	my $p = $PARTIAL{$event};
	(my $db = $event) =~ s/\W+/_/g;
	my $file = "$tmp/$db.sql";
	$node->command_ok([ 'pg_dump', @{ $p->{opts} }, '-f', $file, '-d', $node->connstr('life') ],
		"$event: pg_dump");
	$other->safe_psql('postgres', "CREATE DATABASE $db");
	$other->safe_psql($db, 'CREATE EXTENSION snowseq') if $p->{extension_first};
	$other->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=0', '-f', $file, '-d', $other->connstr($db) ],
		"$event: restored");
	for my $o ('named counter', 'serial')
	{
		$seen{$o}{$db} = { %{ $seen{$o}{life} } };
		$scope{$o} = $db;
		my ($rc, $out, $err) = $other->psql($db, $TAKE{$o});
		if ($p->{recorded})
		{
			is($rc, 0, "$o x $event: its record came back, the counter is usable") or diag($err);
			received($o, "$event (right after the restore)", lines($out)) if $rc == 0;
			next;
		}
		like($err, qr/has no record of the values it issued/,
			"$o x $event: refused, its record did not come back");
		$other->safe_psql($db, "SELECT snowseq_counter_raise('$NAME{$o}', " . last_received($o) . ')');
	}
	check_all($other, $db, $event);
	$scope{'named counter'} = $scope{'serial'} = 'other';
}
$other->stop;

# DROP DATABASE and CREATE DATABASE: the cluster's objects go on; the
# database's counters are new ones (their old values went with their
# database), usable and unique within it
$node->safe_psql('postgres', 'DROP DATABASE life');
$node->safe_psql('postgres', 'DROP DATABASE life_copy');
$node->safe_psql('postgres', 'CREATE DATABASE life');
$node->safe_psql('life', 'CREATE EXTENSION snowseq');
setup_all($node, 'life');
$scope{'named counter'} = $scope{'serial'} = 'life, created again';
check_all($node, 'life', 'DROP/CREATE DATABASE');

# every cell marked check ran
for my $o (@OBJECTS)
{
	for my $e (@EVENTS)
	{
		next unless ($MATRIX{$o}{$e} // '') eq 'check';
		ok($checked{"$o x $e"}, "matrix: the check of $o x $e ran");
	}
}
$node->stop;
done_testing();
