# The documentation holds together and its examples work:
#  1. every relative link between README.md, CHANGELOG.md, CONTRIBUTING.md
#     and the pages under docs/ resolves: the file exists and, with #anchor,
#     has a heading that GitHub gives that anchor;
#  2. every ```sql block of README.md and of the guides (docs/*.md) runs,
#     block after block in the order of the page, in a database of its own per
#     page, on a cluster with snowseq preloaded.  A block that needs a router
#     with shard servers is preceded by <!-- shards: where it runs --> and
#     runs in test/t/066_docs_shards.pl instead; no block is left out of
#     both (any other marker before a block fails here).
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Find ();
use lib 'test';
use PostgreSQL::Test::Utils;
use Test::More;
use SnowseqTest;

# the guides, each of which must hold examples that run
my @GUIDES = qw(snowflake-ids durability genes-and-routing elastic-shards
  counters-and-serials public-ids uuids converting-tables);

my @pages = grep { ok(-f $_, "$_ exists") } ('README.md', 'CHANGELOG.md', 'CONTRIBUTING.md',
	'docs/reference.md', 'docs/design.md');
File::Find::find({ no_chdir => 1, wanted => sub { push @pages, $_ if /\.md$/ } }, 'docs');
my %uniq = map { $_ => 1 } @pages;
@pages = sort keys %uniq;

my %text;
for my $p (@pages)
{
	my $t = slurp_file($p);
	utf8::decode($t);
	$text{$p} = $t;
}

# The text without fenced code blocks (their lines become empty).
sub without_fences
{
	my ($t) = @_;
	my $in = 0;
	my @out;
	for my $line (split /\n/, $t, -1)
	{
		if ($line =~ /^\s*```/) { $in = !$in; push @out, ''; next; }
		push @out, $in ? '' : $line;
	}
	return join("\n", @out);
}

# The anchors GitHub makes for the headings of a page: lower case, every
# character but letters, digits, '_', '-' and spaces removed, spaces turned
# into '-', a repeated anchor suffixed -1, -2, ...
sub anchors
{
	my ($t) = @_;
	my (%seen, %anchor);
	for my $line (split /\n/, without_fences($t))
	{
		next unless $line =~ /^#{1,6}\s+(.*?)\s*$/;
		my $h = lc $1;
		$h =~ s/\[([^\]]*)\]\([^)]*\)/$1/g;
		$h =~ s/<[^>]*>//g;
		$h =~ s/[^\w\- ]//g;
		$h =~ s/ /-/g;
		my $n = $seen{$h}++;
		$anchor{ $n ? "$h-$n" : $h } = 1;
	}
	return \%anchor;
}

my %anchors_of;

# A relative path with its "." and ".." resolved.
sub normalize
{
	my ($path) = @_;
	my @out;
	for my $part (split m{/}, $path)
	{
		next if $part eq '' || $part eq '.';
		if ($part eq '..' && @out && $out[-1] ne '..') { pop @out; }
		else { push @out, $part; }
	}
	return join('/', @out);
}

# ---- 1. links ----
my $links = 0;
for my $p (@pages)
{
	my $t = without_fences($text{$p});
	$t =~ s/`[^`\n]*`//g;    # code spans are not links
	while ($t =~ /!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)
	{
		my $target = $1;
		next if $target =~ /^[a-z][a-z0-9+.-]*:/i;    # http:, mailto:
		$links++;
		my ($path, $anchor) = $target =~ /^([^#]*)(?:#(.*))?$/;
		my $file = $path eq '' ? $p : normalize(dirname($p) . "/$path");
		if (!-e $file)
		{
			fail("$p: link $target: $file does not exist");
			next;
		}
		next unless defined $anchor;
		if ($file !~ /\.md$/)
		{
			fail("$p: link $target: an anchor into a file that is not a page");
			next;
		}
		if (!exists $text{$file})
		{
			my $x = slurp_file($file);
			utf8::decode($x);
			$text{$file} = $x;
		}
		$anchors_of{$file} //= anchors($text{$file});
		ok($anchors_of{$file}{$anchor}, "$p: link $target: $file has a heading with anchor #$anchor");
	}
}
cmp_ok($links, '>', 100, "the pages hold relative links ($links checked)");

# ---- 2. SQL examples ----
# [page, first line, sql, marker] for README.md and docs/*.md
my @blocks;
for my $p (grep { $_ eq 'README.md' || m{^docs/[^/]+\.md$} } @pages)
{
	push @blocks, map { [ $p, @$_ ] } doc_sql_blocks($text{$p});
}

my @marked = grep { defined $_->[3] } @blocks;
is_deeply([ map { "$_->[0]:$_->[1] ($_->[3][0]: $_->[3][1])" } grep { $_->[3][0] ne 'shards' } @marked ], [],
	'every SQL block runs: none is marked otherwise than as running on shard servers (066_docs_shards)');
cmp_ok(scalar(grep { $_->[3][0] eq 'shards' } @marked), '>', 0, 'the blocks for shard servers are found');
for my $g (@GUIDES)
{
	ok(-f "docs/$g.md", "the guide docs/$g.md exists");
	cmp_ok(scalar(grep { $_->[0] eq "docs/$g.md" && !defined $_->[3] } @blocks),
		'>', 0, "docs/$g.md has SQL examples that run");
}

my $node = snowseq_node('docs', conf => ["max_replication_slots = 4", "snowseq.backfill_node_id = 1000"]);
# the roles the GRANT examples name
$node->safe_psql('postgres', "CREATE ROLE $_") for qw(app dba key_admin loader app_owner);

my %db;
my $ran = 0;
for my $b (grep { !defined $_->[3] } @blocks)
{
	my ($p, $line, $sql) = @$b;
	if (!$db{$p})
	{
		($db{$p} = lc "doc_$p") =~ s/[^a-z0-9]+/_/g;
		$node->safe_psql('postgres', "CREATE DATABASE $db{$p}");
		$node->safe_psql($db{$p}, 'CREATE EXTENSION snowseq');
	}
	my ($out, $err) = ('', '');
	my $rc = $node->psql($db{$p}, $sql, stdout => \$out, stderr => \$err, on_error_stop => 1);
	is($rc, 0, "$p: the SQL example at line $line runs")
	  or diag("$err\n--- the example:\n$sql");
	$ran++;
}
cmp_ok($ran, '>=', 25, "$ran SQL examples ran");

$node->stop;
done_testing();
