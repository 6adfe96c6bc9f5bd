#!/usr/bin/perl
# Makes the install and update scripts of the current version from the SQL
# sources (sql/src/, CONTRIBUTING.md "The SQL scripts"):
#
#   perl sql/build.pl install VERSION AREA.sql...   the install script: the
#       areas in the order given (sql/src/areas), each object as it is
#   perl sql/build.pl update TEMPLATE AREA.sql...   the update script: the
#       template (what only an update does: ALTERs of the previous
#       version's objects, conversion of its data) with each
#       "--@include NAME" line replaced by the block NAME of the areas
#
# In an area, "--@block NAME" and "--@end" mark a block an update script
# shares (each function body is written once); the marks are not copied.
# "--@include NAME replace" writes CREATE OR REPLACE for the CREATE
# FUNCTION, PROCEDURE and VIEW statements of the block (objects the
# previous version has).  Every error names the file and line.
use strict;
use warnings;

my ($mode, $arg, @areas) = @ARGV;
die "usage: $0 install VERSION AREA.sql... | update TEMPLATE AREA.sql...\n"
  unless defined $mode && defined $arg && @areas && $mode =~ /^(install|update)$/;

my (%block, %used, @install);
for my $f (@areas)
{
	open(my $fh, '<', $f) or die "$f: $!\n";
	my ($name, $start);
	while (my $line = <$fh>)
	{
		if ($line =~ /^--\@block\s+(\w+)\s*$/)
		{
			die "$f:$.: block $1 begins inside block $name (line $start)\n" if defined $name;
			die "$f:$.: block $1 is defined twice (first in $block{$1}{where})\n" if $block{$1};
			($name, $start) = ($1, $.);
			$block{$name} = { where => "$f:$.", text => '' };
			next;
		}
		if ($line =~ /^--\@end\s*$/)
		{
			die "$f:$.: --\@end outside a block\n" unless defined $name;
			undef $name;
			next;
		}
		die "$f:$.: unknown mark (--\@block NAME or --\@end): $line" if $line =~ /^--\@/;
		$block{$name}{text} .= $line if defined $name;
		push @install, $line;
	}
	die "$f: block $name (line $start) has no --\@end\n" if defined $name;
	close($fh);
	$install[-1] .= "\n" if @install && $install[-1] !~ /\n$/;
}

if ($mode eq 'install')
{
	print "/* snowseq--$arg.sql: install script of the snowseq extension */\n";
	print "/* made from sql/src/ by sql/build.pl (make): edit those, not this file */\n\n";
	print "-- complain if script is sourced in psql, rather than via CREATE EXTENSION\n";
	print "\\echo Use \"CREATE EXTENSION snowseq\" to load this file. \\quit\n\n";
	print @install;
	exit 0;
}

open(my $tf, '<', $arg) or die "$arg: $!\n";
while (my $line = <$tf>)
{
	if ($line =~ /^--\@include\s+(\w+)(\s+replace)?\s*$/)
	{
		my ($name, $replace) = ($1, $2);
		die "$arg:$.: no block $name in the areas (" . join(' ', @areas) . ")\n" unless $block{$name};
		die "$arg:$.: block $name is included twice\n" if $used{$name}++;
		my $text = $block{$name}{text};
		$text =~ s/^CREATE (FUNCTION|PROCEDURE|VIEW) /CREATE OR REPLACE $1 /mg if $replace;
		print $text;
		next;
	}
	die "$arg:$.: unknown mark (--\@include NAME [replace]): $line" if $line =~ /^--\@/;
	print $line;
}
close($tf);
