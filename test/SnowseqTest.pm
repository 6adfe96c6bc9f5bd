# Shared helpers of snowseq's TAP tests.
#
# Whatever a client received counts as issued: IDs are written by psql to
# files outside the server under test, and checked from there.
package SnowseqTest;

use strict;
use warnings;

use Exporter 'import';
use File::Temp ();
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(snowseq_node start_faketime set_fake_offset id_clients
  wait_clients check_ids read_ids all_unique strictly_increasing max_of
  min_of segment_of server_log_since read_state_file script_clients
  read_lines);

my $LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

# A new cluster with snowseq preloaded.  Options:
#   node_id => N (default 1; undef leaves it unset), conf => [lines],
#   preload => 0 to leave shared_preload_libraries alone,
#   streaming => 1 for a primary that takes standbys ('logical' for a
#   publisher of logical replication),
#   faketime => file (start the postmaster under libfaketime),
#   start => 0 to leave it stopped, extension => 0 to skip CREATE EXTENSION.
sub snowseq_node
{
	my ($name, %o) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(allows_streaming => $o{streaming} // 0);
	my $conf = '';
	$conf .= "shared_preload_libraries = 'snowseq'\n" unless defined $o{preload} && !$o{preload};
	my $id = exists $o{node_id} ? $o{node_id} : 1;
	$conf .= "snowseq.node_id = $id\n" if defined $id;
	$conf .= "$_\n" for @{ $o{conf} || [] };
	$node->append_conf('postgresql.conf', $conf);
	return $node if defined $o{start} && !$o{start};
	if ($o{faketime}) { start_faketime($node, $o{faketime}); }
	else { $node->start; }
	$node->safe_psql('postgres', 'CREATE EXTENSION snowseq')
	  unless defined $o{extension} && !$o{extension};
	return $node;
}

# Start a node with its postmaster (and so every backend) under libfaketime,
# reading the offset from $file at every clock call.
sub start_faketime
{
	my ($node, $file, %opts) = @_;
	set_fake_offset($file, '+0') unless -e $file;
	local $ENV{LD_PRELOAD} = $LIBFAKETIME;
	local $ENV{FAKETIME_TIMESTAMP_FILE} = $file;
	local $ENV{FAKETIME_NO_CACHE} = 1;
	local $ENV{FAKETIME_DONT_FAKE_MONOTONIC} = 1;
	$node->start(%opts);
}

# Set the offset libfaketime applies, e.g. '-10m', '+0', '-1h'.
sub set_fake_offset
{
	my ($file, $offset) = @_;
	open my $fh, '>', "$file.tmp" or die "cannot write $file: $!";
	print $fh "$offset\n";
	close $fh;
	rename "$file.tmp", $file or die "cannot rename $file: $!";
}

# Start $n psql clients, each running $sql, with the rows each received
# written to a file of its own.  Returns [ [harness, file], ... ].
sub id_clients
{
	my ($node, $n, $sql, $tag) = @_;
	my @c;
	for my $i (1 .. $n)
	{
		my $file = sprintf('%s/ids_%s_%d.txt', $PostgreSQL::Test::Utils::tmp_check, $tag // 'c', $i);
		my ($err) = ('');
		my $h = IPC::Run::start(
			[ 'psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-c', $sql ],
			'>', $file, '2>', \$err);
		push @c, [ $h, $file, \$err ];
	}
	return \@c;
}

# Start one client per script (a string of statements), each run by psql
# from a file, what it printed written to a file of its own.  Options:
# on_error_stop => 0 to go on after a failed statement.  Returns
# [ [harness, file, \$stderr], ... ], like id_clients.
sub script_clients
{
	my ($node, $tag, $scripts, %o) = @_;
	my $stop = defined $o{on_error_stop} ? $o{on_error_stop} : 1;
	my @c;
	for my $i (0 .. $#$scripts)
	{
		my $script = sprintf('%s/%s_%d.sql', $PostgreSQL::Test::Utils::tmp_check, $tag, $i);
		open my $fh, '>', $script or die "cannot write $script: $!";
		print $fh $scripts->[$i];
		close $fh;
		my $file = sprintf('%s/%s_%d.out', $PostgreSQL::Test::Utils::tmp_check, $tag, $i);
		my $err = '';
		my $h = IPC::Run::start(
			[ 'psql', '-X', '-At', '-q', '-v', "ON_ERROR_STOP=$stop", '-d', $node->connstr('postgres'),
			  '-f', $script ],
			'>', $file, '2>', \$err);
		push @c, [ $h, $file, \$err ];
	}
	return \@c;
}

# The complete lines of a file that match $re (every non-empty line without
# one): a client killed while printing leaves a torn last line, which it
# never received whole.
sub read_lines
{
	my ($file, $re) = @_;
	open my $fh, '<', $file or return ();
	my @l;
	while (my $l = <$fh>)
	{
		last unless $l =~ /\n\z/;
		chomp $l;
		push @l, $l if length($l) && (!defined $re || $l =~ $re);
	}
	return @l;
}

# Wait for clients; returns the number that failed (expected after a crash).
sub wait_clients
{
	my ($clients) = @_;
	my $failed = 0;
	for my $c (@$clients)
	{
		eval { $c->[0]->finish; 1 } or $failed++;
		$failed++ if $c->[0]->result(0);
	}
	return $failed;
}

# Read the IDs of a file (the complete lines only: a client killed while
# printing may leave a torn last line, which it never received whole).
sub read_ids
{
	return read_lines($_[0], qr/^\d+$/);
}

sub strictly_increasing
{
	my ($ids) = @_;
	for my $i (1 .. $#$ids)
	{
		return 0 unless $ids->[$i] > $ids->[ $i - 1 ];
	}
	return 1;
}

sub all_unique
{
	my ($ids) = @_;
	my %seen;
	for (@$ids)
	{
		return 0 if $seen{$_}++;
	}
	return 1;
}

sub max_of
{
	my $m = 0;
	for (@_) { $m = $_ if $_ > $m; }
	return $m;
}

sub min_of
{
	my $m;
	for (@_) { $m = $_ if !defined $m || $_ < $m; }
	return $m;
}

# The segment of a gene ID: its low 48 bits (counter << node_bits | node).
sub segment_of
{
	return $_[0] & ((1 << 48) - 1);
}

# Check every client's IDs: positive, strictly increasing within each
# client, unique across all.  Returns the union.
sub check_ids
{
	my ($clients, $what) = @_;
	my @all;
	my $inc = 1;
	for my $c (@$clients)
	{
		my @ids = read_ids($c->[1]);
		$inc = 0 unless strictly_increasing(\@ids);
		push @all, @ids;
	}
	ok($inc, "$what: each session's IDs strictly increase");
	ok(all_unique(\@all), "$what: no duplicate among " . scalar(@all) . " IDs");
	ok(!(grep { $_ <= 0 } @all), "$what: every ID is positive");
	return \@all;
}

# A state file (version 2) as a hash: node_id, layout ("t/n/s\@unit"),
# epoch_ms, clock and segment (their bounds), and counters (name => bound);
# undef when the file is missing or not a snowseq state file.  Layout:
# magic, version, the configuration (six int32, an int64 epoch), the number
# of reservations, then per reservation its tag, database, name (64 bytes),
# bound, block and margin, then a CRC-32C.
sub read_state_file
{
	my ($file) = @_;
	open my $fh, '<:raw', $file or return undef;
	local $/;
	my $buf = <$fh>;
	close $fh;
	return undef unless defined $buf && length($buf) >= 48;
	my ($magic, $version, $node_id, $tb, $nb, $sb, $unit, $pad, $epoch, $nslots) =
	  unpack('L< L< l< l< l< l< l< l< q< L<', $buf);
	return undef unless $magic == 0x53455153 && $version == 2;
	my %s = (node_id => $node_id, layout => "$tb/$nb/$sb\@$unit", epoch_ms => $epoch, counters => {});
	for my $i (0 .. $nslots - 1)
	{
		my ($tag, $db, $name, $bound, $block, $margin) =
		  unpack('L< L< Z64 Q< Q< Q<', substr($buf, 48 + 96 * $i, 96));
		if ($tag == 1) { $s{clock} = $bound; }
		elsif ($tag == 2) { $s{segment} = $bound; }
		else { $s{counters}{$name} = $bound; }
	}
	return \%s;
}

# The server log written after byte offset $from.
sub server_log_since
{
	my ($node, $from) = @_;
	return substr(slurp_file($node->logfile), $from // 0);
}

1;
