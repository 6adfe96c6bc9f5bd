#!/bin/bash
# The PGXN distribution as `make dist` makes it: in a fresh clone of the
# committed HEAD (or of the commit or tag given), make dist writes snowseq-VERSION.zip; its files lie under
# one directory snowseq-VERSION/ (PGXN's layout), its META.json is valid
# against the PGXN Meta Spec 1.0.0 (test/PgxnMeta.pm) and names that
# version, and the files META.json names (the install script, the docfile)
# and what building needs are in it.  The zip is left where
# SNOWSEQ_DIST_OUT says (default: a temporary directory, removed).
#
# Usage: bash test/dist.sh [REF]        e.g. bash test/dist.sh v1.2.0
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib.sh

install_missing unzip libjson-perl git
tmp=$(mktemp -d "${TMPDIR:-/tmp}/snowseq-dist.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
git clone -q --no-checkout . "$tmp/clone"
git -C "$tmp/clone" checkout -q "$(git rev-parse --verify "${1:-HEAD}^{commit}")"
make -s -C "$tmp/clone" PG_CONFIG="$PG_CONFIG" dist
zip=$(cd "$tmp/clone" && ls snowseq-*.zip)
echo "make dist: $zip ($(stat -c %s "$tmp/clone/$zip") bytes, $(unzip -Z1 "$tmp/clone/$zip" | grep -vc '/$') files)"
mkdir "$tmp/x"
unzip -q "$tmp/clone/$zip" -d "$tmp/x"
perl -I test -MPgxnMeta -MJSON::PP -e '
	my ($zip, $dir) = @ARGV;
	my @top = glob("$dir/*");
	die "dist: the zip must hold one directory, not @top\n" unless @top == 1 && -d $top[0];
	my $root = $top[0];
	local $/;
	open my $fh, "<", "$root/META.json" or die "dist: no META.json at the top of $zip\n";
	my $meta = decode_json(<$fh>);
	my @e = PgxnMeta::errors($meta);
	die "dist: META.json is not valid:\n  " . join("\n  ", @e) . "\n" if @e;
	my $want = "$meta->{name}-$meta->{version}";
	die "dist: the zip is $zip, META.json says $want\n" unless $zip eq "$want.zip";
	die "dist: its directory is $root, META.json says $want\n" unless $root eq "$dir/$want";
	for my $ext (sort keys %{ $meta->{provides} })
	{
		for my $f (grep { defined } @{ $meta->{provides}{$ext} }{qw(file docfile)})
		{
			die "dist: $f, named by META.json, is not in the zip\n" unless -f "$root/$f";
		}
	}
	for my $f (qw(Makefile snowseq.control LICENSE))
	{
		die "dist: $f is not in the zip\n" unless -f "$root/$f";
	}
	print "dist: $zip is valid (PGXN Meta Spec $meta->{q(meta-spec)}{version}, release_status ",
	  $meta->{release_status} // "stable", ")\n";
' "$zip" "$tmp/x"
if [ -n "${SNOWSEQ_DIST_OUT:-}" ]; then
	mkdir -p "$SNOWSEQ_DIST_OUT"
	cp "$tmp/clone/$zip" "$SNOWSEQ_DIST_OUT/"
	echo "dist: $SNOWSEQ_DIST_OUT/$zip"
fi
