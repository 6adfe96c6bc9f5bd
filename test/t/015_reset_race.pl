# A reset racing with generation: four clients generate snowflake and gene
# IDs while the state files are deleted and snowseq_reset_state() is called
# again and again, with a segment floor far below where the counters stand.
# Counters only ever rise, so no client receives an ID twice.
use strict;
use warnings;
use lib 'test';
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

# two clients take gene IDs, two snowflake IDs, each in many statements
# (psql runs a round of 10 statements again and again, until the test says
# stop); a statement that fails (see below) does not stop a client
my $per = 10000;
my $tmp = $PostgreSQL::Test::Utils::tmp_check;
my $stop = "$tmp/race_stop";
my %rounds = (
	gene => join('', map { "COPY (SELECT snowseq_gene_next('race-key') FROM generate_series(1, $per) g) TO STDOUT;\n" } 1 .. 10),
	snowflake => join('', map { "COPY (SELECT snowseq_next() FROM generate_series(1, $per) g) TO STDOUT;\n" } 1 .. 10),
);
my @kinds = qw(gene gene snowflake snowflake);
my $clients = [];
for my $i (0 .. $#kinds)
{
	my $round = "$tmp/race_$i.sql";
	open my $fh, '>', $round or die "cannot write $round: $!";
	print $fh $rounds{ $kinds[$i] };
	close $fh;
	my ($out, $err) = ("$tmp/race_$i.out", "$tmp/race_$i.err");
	my $h = IPC::Run::start([ 'bash', '-c', q{
			while [ ! -e "$3" ]; do psql -X -At -q -d "$1" -f "$2" >> "$4" 2>> "$5"; done
		}, 'client', $node->connstr('postgres'), $round, $stop, $out, $err ]);
	push @$clients, [ $h, $out, \my $e, $err ];
}

# meanwhile, from one session: delete the state files and reset, 20 times,
# each time after the clients have generated another $per IDs (the
# server's count): the resets interleave with generation on any machine,
# and the clients go on until all 20 are done
my ($resets, $failed) = (0, 0);
my $resetter = $node->background_psql('postgres', on_error_stop => 0);
for my $i (1 .. 20)
{
	my $issued = $node->safe_psql('postgres', 'SELECT ids_issued FROM snowseq_status');
	last unless $node->poll_query_until('postgres', "SELECT ids_issued >= $issued + $per FROM snowseq_status", 't');
	unlink $state, $copy;
	$resetter->{stderr} = '';
	my $out = $resetter->query('SELECT snowseq_reset_state(segment_floor => 0)');
	if ($resetter->{stderr} eq '') { $resets++; }
	else { $failed++; diag($resetter->{stderr}) if $failed < 3; }
}
ok((grep { $_->[0]->pumpable } @$clients) == 4, 'the clients were still generating after the last reset');
open my $stop_fh, '>', $stop or die "cannot write $stop: $!";
close $stop_fh;
$resetter->quit;
is(wait_clients($clients), 0, 'every client finished');
${ $_->[2] } = -e $_->[3] ? slurp_file($_->[3]) : '' for @$clients;
note "$resets resets while the clients generated";
is($resets, 20, 'the resets really raced with generation');
is($failed, 0, 'no reset failed');

# an advance that finds its state file deleted under it between the write
# and the fsync fails: that statement gets an ERROR and no ID
my @errors = map { grep { /ERROR/ } split /\n/, ${ $_->[2] } } @$clients;
note scalar(@errors) . ' statements failed: ' . join(' / ', @errors[ 0 .. ($#errors < 2 ? $#errors : 2) ]);
ok(!(grep { !/could not (open|fsync|rename) file "snowseq\.state/ } @errors),
	'the only errors are state files deleted while being written');
my $all = check_ids($clients, 'resets racing with generation');
cmp_ok(scalar(@$all), '>=', 20 * $per, scalar(@$all) . ' IDs received');
is($node->safe_psql('postgres', 'SELECT state FROM snowseq_status'), 'ok', 'state ok');
$node->stop;
done_testing();
