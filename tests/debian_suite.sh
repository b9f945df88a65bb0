# Sourced by the scripts that fetch Debian packages of another suite for the
# tests (tests/kernels/fetch.sh, tests/go/fetch.sh), as root, into a cache
# of their own; the machine's sources and lists are never touched.

# own_cache DIR: makes DIR, and refuses one that another user could write.
own_cache() {
  (umask 077 && mkdir -p "$1")
  if [ -L "$1" ] || [ "$(stat -c %u "$1")" != "$(id -u)" ] || [ -n "$(find "$1" -maxdepth 0 -perm /022)" ]; then
    echo "$0: $1 is not a directory of this user's alone; refusing to use it" >&2
    exit 1
  fi
}

# suite_apt SUITE DIR: sets apt_opts, an apt configuration in DIR for
# Debian's SUITE (and its security suite; backports and sid have none), its lists
# fetched when older than a day.
suite_apt() {
  local suite=$1 apt_dir=$2
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/etc"
  {
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main"
    case $suite in
      *-* | sid | unstable) ;;
      *) echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security $suite-security main" ;;
    esac
  } >"$apt_dir/etc/sources.list"
  apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/etc/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o "Dir::State::status=/dev/null"
    -o "APT::Sandbox::User=root" -o "Debug::NoLocking=1")
  # A mirror may hold a sid Release past its Valid-Until (sid_root.sh too).
  [ "$suite" != sid ] || apt_opts+=(-o "Acquire::Check-Valid-Until=false")
  if [ -z "$(find "$apt_dir/lists" -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -n 1)" ]; then
    apt-get "${apt_opts[@]}" -qq update >&2
  fi
}
