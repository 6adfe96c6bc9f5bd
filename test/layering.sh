#!/bin/bash
# The layering of snowseq's C files, from the built objects: file A depends
# on file B when A uses a symbol (a function or a variable) that B defines
# (nm: A's undefined symbols against B's defined ones).  Prints each file's
# dependencies, then every cycle (strongly connected group of files); fails
# when a cycle other than the allowed one is found, when a function of the
# core is not in the file its prefix names (ReservationSave in reserve.c,
# ClockNext in clock.c, StateWriteFiles in statefile.c, ...; the prefix of
# a part kept in several files names them all: Keyring names keyring.c,
# keyring_file.c and keyring_seal.c), or when a header declares a function
# the file of its name does not define (every header: reserve.h declares
# reserve.c's API, guc.h guc.c's, move_plan.h move_plan.c's; a header with
# no file of its name, compat.h or debug.h, may declare none).
# Folders are layers: src/ is the core, the folders of src/shards/ the
# router side of elastic shards (one per role: operations/, records/,
# replication/, ...), src/shards/server/ what runs on shard servers.  The core
# never uses nor includes anything of src/shards/ (except snowseq.c, the
# module's entry, which calls each subsystem's Init), and the server side
# never uses nor includes the router side.
# Usage: bash test/layering.sh [DIR]   (DIR holds the .o files and the
# sources, in those folders; default src)
# The one cycle allowed is WAL logging and its redo: reserve.c writes the
# records that rmgr.c replays into the reservations.
# Sizes, from the sources: no .c or .h file over 1,000 lines (LONG), and
# no struct or union with over 30 members (STRUCT): a struct that grows
# past that holds several roles, to be split into typed parts (issue 39).
# Members are the declarators between "struct X {" (or "typedef struct X
# {", "typedef struct {") and its closing brace: each ";" and each ","
# outside parentheses and brackets at the struct's own level; comments,
# strings and preprocessor lines do not count, and a nested struct or
# union is one member of the struct it is in (and is counted on its own).
set -euo pipefail
dir=${1:-src}
allowed=${LAYERING_ALLOWED:-"reserve rmgr"}
shopt -s nullglob
# the folders: the core, then src/shards/ and each of its folders (the
# router side's role folders, and server/); src/shards/ itself holds no
# source (064 checks it), only objects of a build from before the role
# folders, which make clean removes, or a synthetic tree of 064's
folders=("$dir" "$dir"/shards)
for d in "$dir"/shards/*/; do folders+=("${d%/}"); done
objs=() sources=() headers=()
for d in "${folders[@]}"; do
	objs+=("$d"/*.o); sources+=("$d"/*.[ch]); headers+=("$d"/*.h)
done
if [ ${#objs[@]} -eq 0 ]; then
	echo "layering: no object files in $dir (run make first)" >&2
	exit 2
fi
max_lines=${LAYERING_MAX_LINES:-1000}
max_members=${LAYERING_MAX_MEMBERS:-30}
sizes_ok=1
perl -e '
	use strict; use warnings;
	my ($max_lines, $max_members, @files) = @ARGV;
	my $bad = 0;
	my ($nfiles, $nstructs) = (0, 0);
	for my $f (@files)
	{
		open(my $fh, "<", $f) or die "$f: $!";
		my $text = do { local $/; <$fh> };
		close($fh);
		$nfiles++;
		my $lines = () = $text =~ /\n/g;
		$lines++ if length($text) && substr($text, -1) ne "\n";
		if ($lines > $max_lines)
		{
			print "LONG: $f has $lines lines (at most $max_lines): split it by role\n";
			$bad = 1;
		}
		# comments, strings and characters, preprocessor lines: blanks
		# (newlines kept, for the line numbers)
		$text =~ s{(/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\x27(?:\\.|[^\x27\\\n])*\x27)}
			{ my $c = $1; $c =~ s/[^\n]/ /g; $c }gse;
		$text =~ s{^[ \t]*#(?:[^\n]*\\\n)*[^\n]*}{ my $c = $&; $c =~ s/[^\n]/ /g; $c }gme;
		# each struct or union body, its members at its own level
		my @open;				# [name, line, members, paren depth] of each open struct
		my @braces;				# for each open brace: a struct (its index in @open) or not (-1)
		my $pending;			# "struct X" seen, its brace not yet
		my $line = 1;
		while ($text =~ /\G(?:(\n)|\b(struct|union)\b\s*(\w*)\s*(?=\{)|(\{)|(\})|([;,])|([(\[])|([)\]])|([^\n{};,()\[\]]))/gc)
		{
			if (defined $1) { $line++; next }
			if (defined $2)
			{
				$pending = [$3 ne "" ? "$2 $3" : "$2 (anonymous)", $line];
				next;
			}
			if (defined $4)
			{
				if ($pending)
				{
					push @open, [@$pending, 0, 0];
					push @braces, $#open;
					undef $pending;
				}
				else { push @braces, -1 }
				next;
			}
			if (defined $5)
			{
				my $b = pop @braces;
				next unless defined $b && $b >= 0;
				my $s = pop @open;
				# after the brace: its typedef name, if it has none
				if ($s->[0] =~ /\(anonymous\)$/ && $text =~ /\G\s*(\w+)\s*;/)
				{
					my $typedef = $1;
					$s->[0] =~ s/\(anonymous\)/$typedef/;
				}
				$nstructs++;
				if ($s->[2] > $max_members)
				{
					print "STRUCT: $f:$s->[1]: $s->[0] has $s->[2] members (at most $max_members): group them in typed parts\n";
					$bad = 1;
				}
				next;
			}
			if (defined $6)
			{
				# a member of the innermost open brace, if that brace is a struct
				next unless @braces && $braces[-1] >= 0;
				my $s = $open[$braces[-1]];
				$s->[2]++ if $s->[3] == 0;
				next;
			}
			if (defined $7) { $open[$braces[-1]][3]++ if @braces && $braces[-1] >= 0; next }
			if (defined $8) { $open[$braces[-1]][3]-- if @braces && $braces[-1] >= 0; next }
		}
	}
	print $bad ? "sizes: FAILED\n" : "sizes: $nfiles files of at most $max_lines lines, $nstructs structs of at most $max_members members\n";
	exit $bad;
' "$max_lines" "$max_members" "${sources[@]}" || sizes_ok=0
# the layer of each file (core, shards, server), from its folder
layer_of() {
	case "$1" in
		"$dir"/shards/server/*) echo server ;;
		"$dir"/shards/*) echo shards ;;
		*) echo core ;;
	esac
}
# the includes of snowseq's own headers, as "I file header" lines
{
for c in "${sources[@]}"; do
	f=$(basename "$c"); f=${f%.*}
	sed -n 's/^#include "\([a-z_0-9]*\)\.h".*/\1/p' "$c" | while read -r h; do
		echo "I $f $h"
	done
done
for h in "${headers[@]}"; do
	echo "L $(basename "$h" .h) $(layer_of "$h")"
done
for o in "${objs[@]}"; do
	f=$(basename "$o" .o)
	echo "L $f $(layer_of "$o")"
	nm "$o" | awk -v f="$f" '
		$1 == "U" { print "U", f, $2; next }
		NF == 3 && $2 ~ /^[TDBRVWG]$/ { print "D", f, $3 }
		NF == 3 && $2 == "T" { print "T", f, $3 }'
done
} | HEADERS="${folders[*]}" perl -e '
	use strict; use warnings;
	my @allowed = sort split /\s+/, $ARGV[0];
	my (%def, %use, %edge, @func, %layer, @incl);
	while (<STDIN>)
	{
		my ($k, $f, $s) = split;
		if ($k eq "L") { $layer{$f} = $s; next }
		if ($k eq "I") { push @incl, [$f, $s]; next }
		if ($k eq "D") { $def{$s} = $f }
		elsif ($k eq "T") { push @func, [$f, $s] }
		else { push @{$use{$f}}, $s }
		$edge{$f} //= {};
	}
	for my $f (keys %use)
	{
		for my $s (@{$use{$f}})
		{
			my $g = $def{$s};
			$edge{$f}{$g}{$s} = 1 if defined $g && $g ne $f;
		}
	}
	for my $f (sort keys %edge)
	{
		my @to = sort keys %{$edge{$f}};
		printf "%-10s -> %s\n", $f, join(" ", @to) if @to;
	}
	# Tarjan: strongly connected components
	my ($idx, %index, %low, %on, @stack, @sccs) = (0);
	my $visit;
	$visit = sub {
		my $v = shift;
		$index{$v} = $low{$v} = $idx++;
		push @stack, $v; $on{$v} = 1;
		for my $w (sort keys %{$edge{$v}})
		{
			if (!exists $index{$w}) { $visit->($w); $low{$v} = $low{$w} if $low{$w} < $low{$v} }
			elsif ($on{$w}) { $low{$v} = $index{$w} if $index{$w} < $low{$v} }
		}
		if ($low{$v} == $index{$v})
		{
			my @c;
			while (1) { my $w = pop @stack; $on{$w} = 0; push @c, $w; last if $w eq $v }
			push @sccs, [sort @c] if @c > 1;
		}
	};
	for my $v (sort keys %edge) { $visit->($v) unless exists $index{$v} }
	my $bad = 0;
	for my $c (@sccs)
	{
		my $ok = "@$c" eq "@allowed";
		print(($ok ? "allowed cycle: " : "CYCLE: "), join(" ", @$c), "\n");
		next if $ok;
		$bad = 1;
		# the calls that make the ring, so the reader sees where to cut
		my %in = map { $_ => 1 } @$c;
		for my $f (@$c)
		{
			for my $g (sort grep { $in{$_} } keys %{$edge{$f}})
			{
				print "  $f -> $g: ", join(" ", sort keys %{$edge{$f}{$g}}), "\n";
			}
		}
	}
	# the layers: the core uses nothing of shards/ (but the module entry,
	# snowseq.c, calls their Init), the server side nothing of the router side
	my %below = (core => {core => 1}, server => {core => 1, server => 1},
		shards => {core => 1, server => 1, shards => 1});
	my $reaches = sub {
		my ($f, $g) = @_;
		return 1 if $f eq "snowseq";
		my ($lf, $lg) = ($layer{$f} // "core", $layer{$g} // "core");
		return $below{$lf}{$lg};
	};
	for my $f (sort keys %edge)
	{
		for my $g (sort keys %{$edge{$f}})
		{
			next if $reaches->($f, $g);
			print "LAYER: $f.c ($layer{$f}) uses $g.c ($layer{$g}): ", join(" ", sort keys %{$edge{$f}{$g}}), "\n";
			$bad = 1;
		}
	}
	for my $i (@incl)
	{
		my ($f, $h) = @$i;
		next unless exists $layer{$h} && !$reaches->($f, $h);
		print "LAYER: $f ($layer{$f}) includes $h.h ($layer{$h})\n";
		$bad = 1;
	}
	# the core: each prefix names the file that defines its functions (or
	# the files, for a part kept in several)
	my %home = (
		Backfill => "backfill", CatCache => "catcache", Clock => "clock",
		Counter => "counter", CounterCache => "counter_cache",
		CounterDef => "counter_def", CounterFloor => "counter_floor",
		CounterRights => "counter_rights", Serial => "serial", Ext => "sqlrun", Gene => "gene", Guc => "guc",
		Keyring => "keyring keyring_file keyring_seal", KeyStore => "keystore", KeyAdmin => "keyadmin", Nodes => "nodes", Reservation => "reserve",
		Reserve => "reserve", Rmgr => "rmgr", Segment => "segment",
		WideSegment => "segment", Shmem => "shmem", Snowseq => "snowseq",
		Spi => "sqlrun", State => "statefile", SyncRep => "syncrep",
		Time => "timeutil", Worker => "worker");
	my @prefixes = sort { length($b) <=> length($a) } keys %home;
	for my $fs (sort { $a->[1] cmp $b->[1] } @func)
	{
		my ($f, $s) = @$fs;
		my ($p) = grep { $s =~ /^\Q$_\E[A-Z0-9]/ } @prefixes;
		next unless defined $p;
		my @homes = split / /, $home{$p};
		next if grep { $_ eq $f } @homes;
		print "MISPLACED: $s is in $f.c, its prefix names ", join(" or ", map { "$_.c" } @homes), "\n";
		$bad = 1;
	}
	# every header declares what the file of its name defines (a header
	# with no file of its name, compat.h or debug.h, declares no function)
	my %where = map { $_->[1] => $_->[0] } @func;
	for my $hp (sort map { glob("$_/*.h") } split / /, $ENV{HEADERS})
	{
		my ($h) = $hp =~ m{(\w+)\.h$};
		my @files = ($h);
		open(my $fh, "<", $hp) or die "$hp: $!";
		my $text = do { local $/; <$fh> };
		close($fh);
		while ($text =~ /^extern\s+[^;(]*?\b(\w+)\s*\(/mg)
		{
			my $fn = $1;
			my $in = $where{$fn} // "no file";
			next if grep { $_ eq $in } @files;
			print "HEADER: $h.h declares $fn, defined in $in\n";
			$bad = 1;
		}
		# and the variables it declares
		while ($text =~ /^extern\s+[^;(]*?\b(\w+)\s*(?:\[[^]]*\])?\s*;/mg)
		{
			my $var = $1;
			my $in = $def{$var} // "no file";
			next if grep { $_ eq $in } @files;
			print "HEADER: $h.h declares $var, defined in $in\n";
			$bad = 1;
		}
	}
	print $bad ? "layering: FAILED\n" : "layering: no cycle but the allowed one, each folder uses only the layers below it, every core function in the file its prefix names and declared in its header\n";
	exit $bad;
' "$allowed" || exit 1
[ "$sizes_ok" = 1 ] || exit 1
