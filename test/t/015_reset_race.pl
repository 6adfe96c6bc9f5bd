# A reset racing with generation: four clients generate snowflake and gene
# IDs while the state files are deleted and snowseq_reset_state() is called
# again and again, with a segment floor far below where the counters stand.
# Counters only ever rise, so no client receives an ID twice.
use strict;
use warnings;
use lib 'test';
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

# fsync = off: each reset and advance is cheap, so they come thick and
# fast; default block sizes, so the generators run free between them
my $node = snowseq_node('race', node_id => 4, conf => [ 'fsync = off' ]);
my $state = $node->data_dir . '/snowseq.state';
my $copy = $node->data_dir . '/snowseq.state.copy';

# the counters stand somewhere first
$node->safe_psql('postgres', "SELECT count(snowseq_gene_next(g::bigint)) FROM generate_series(1, 20000) g");

# two clients take gene IDs, two snowflake IDs, each in many statements;
# a statement that fails (see below) does not stop a client
my $rounds = 150;
my $per = 10000;
my %scripts = (
	gene => join('', map { "COPY (SELECT snowseq_gene_next('race-key') FROM generate_series(1, $per) g) TO STDOUT;\n" } 1 .. $rounds),
	snowflake => join('', map { "COPY (SELECT snowseq_next() FROM generate_series(1, $per) g) TO STDOUT;\n" } 1 .. $rounds),
);
my $clients = script_clients($node, 'race', [ @scripts{qw(gene gene snowflake snowflake)} ],
	on_error_stop => 0);

# meanwhile, from one session: delete the state files and reset, again and
# again, until the clients are done
my ($resets, $failed) = (0, 0);
my $resetter = $node->background_psql('postgres', on_error_stop => 0);
my $deadline = time() + 60;
while (time() < $deadline && grep { $_->[0]->pumpable } @$clients)
{
	unlink $state, $copy;
	$resetter->{stderr} = '';
	my $out = $resetter->query('SELECT snowseq_reset_state(segment_floor => 0)');
	if ($resetter->{stderr} eq '') { $resets++; }
	else { $failed++; diag($resetter->{stderr}) if $failed < 3; }
	eval { $_->[0]->pump_nb } for @$clients;
}
$resetter->quit;
is(wait_clients($clients), 0, 'every client finished');
note "$resets resets while the clients generated";
cmp_ok($resets, '>=', 10, 'the resets really raced with generation');
is($failed, 0, 'no reset failed');

# an advance that finds its state file deleted under it between the write
# and the fsync fails: that statement gets an ERROR and no ID
my @errors = map { grep { /ERROR/ } split /\n/, ${ $_->[2] } } @$clients;
note scalar(@errors) . ' statements failed: ' . join(' / ', @errors[ 0 .. ($#errors < 2 ? $#errors : 2) ]);
ok(!(grep { !/could not (open|fsync|rename) file "snowseq\.state/ } @errors),
	'the only errors are state files deleted while being written');
my $all = check_ids($clients, 'resets racing with generation');
cmp_ok(scalar(@$all), '>=', 0.8 * 4 * $rounds * $per, scalar(@$all) . ' IDs received');
is($node->safe_psql('postgres', 'SELECT state FROM snowseq_status'), 'ok', 'state ok');
$node->stop;
done_testing();
