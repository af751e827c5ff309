//! Which containers a multi-file location names, without opening them: a glob
//! (`data/temps_*.b2nd`, `data/year=*/station=north/*.b2nd`, `data/**/*.b2nd`) or a
//! directory (its Blosc2 entries and those of its hive partition directories `key=value/`,
//! at any depth). Opening the members and checking their schemas is the session's
//! ([`super::session`]).
//!
//! Globs follow DataFusion's listing tables: the location up to the first path component
//! holding `*`, `?` or `[` is the table's root, and the rest is matched component by
//! component with [`glob::Pattern`] (`*` and `?` within one component, `[abc]`, `[!abc]`,
//! `[a-z]`), `**` standing for any number of directories. Directories are listed one
//! level at a time, a few at a time: on a remote store each listing is a round trip.

use super::multi::MEMBER_EXTENSIONS;
use super::session::resolve_location;
use super::to_df;
use crate::io::Location;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::runtime_env::RuntimeEnv;
use futures::{StreamExt, TryStreamExt};
use glob::{MatchOptions, Pattern};

/// How many directories are listed at once.
const LIST_CONCURRENCY: usize = 16;

/// How deep a walk may go below a table's root (hive partition directories, or the
/// directories a `**` crosses).
const MAX_DEPTH: usize = 32;

/// True for a name with a Blosc2 container extension (`.b2nd`, `.b2frame`, `.b2f`,
/// `.b2z`, `.b2d`): the entries of a directory that a directory table reads.
pub(crate) fn is_member_name(name: &str) -> bool {
    MEMBER_EXTENSIONS.iter().any(|x| name.ends_with(x))
}

/// The entries of a listing with a Blosc2 extension.
fn containers<'a>(files: &'a [String], dirs: &'a [String]) -> impl Iterator<Item = String> + 'a {
    files
        .iter()
        .chain(dirs)
        .filter(|n| is_member_name(n))
        .cloned()
}

/// True when a path component of `location` is a glob.
pub(crate) fn is_glob(location: &str) -> bool {
    location.split('/').any(is_glob_component)
}

/// True for a path component holding `*`, `?` or `[`.
fn is_glob_component(component: &str) -> bool {
    component.contains(['*', '?', '['])
}

/// The containers a glob or directory location holds: the directory they are below and
/// their paths below it, sorted.
pub(crate) struct MemberList {
    /// The table's root as the user wrote it (for messages and partition inference).
    pub(crate) root: String,
    /// Where `root` is: members are below it (their names as listed, not as URL text:
    /// `station=a%20b` is that directory, not `station=a b`).
    pub(crate) root_location: Location,
    /// The members' paths below `root`, sorted.
    pub(crate) rels: Vec<String>,
}

impl MemberList {
    /// The members' locations.
    pub(crate) fn locations(&self) -> Vec<Location> {
        self.rels
            .iter()
            .map(|r| self.root_location.child(r))
            .collect()
    }
}

/// One path component of a glob.
enum Component {
    /// `**`: any number of directories (none included).
    AnyDirs,
    /// A name pattern (a literal name is a pattern too).
    Name(Pattern),
}

/// Matching within one component: names hold no `/`, and `*` matches a leading dot.
const NAME_MATCH: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

impl Component {
    fn matches(&self, name: &str) -> bool {
        match self {
            Component::AnyDirs => true,
            Component::Name(p) => p.matches_with(name, NAME_MATCH),
        }
    }
}

/// What to do in each directory of a walk: which of its entries are members, and which
/// of its subdirectories to list next with what state.
trait Walk {
    /// Where the walk is in its pattern (nothing, for a directory table).
    type State: Clone + Ord;

    /// What the directories it enters are, for the error when they nest too deep.
    const ENTERS: &'static str;

    /// Sorts the listing `(files, dirs)` of a directory reached in `state` into members
    /// and `(subdirectory name, state)` pairs to visit.
    fn step(
        &self,
        state: &Self::State,
        files: &[String],
        dirs: &[String],
        members: &mut Vec<String>,
        next: &mut Vec<(String, Self::State)>,
    );
}

/// A directory table: entries with a Blosc2 extension, and `key=value` directories
/// that are not containers themselves.
struct DirectoryWalk;

impl Walk for DirectoryWalk {
    type State = ();
    const ENTERS: &'static str = "partition directories";

    fn step(
        &self,
        _: &(),
        files: &[String],
        dirs: &[String],
        members: &mut Vec<String>,
        next: &mut Vec<(String, ())>,
    ) {
        members.extend(containers(files, dirs));
        next.extend(
            dirs.iter()
                .filter(|d| !is_member_name(d) && d.contains('='))
                .map(|d| (d.clone(), ())),
        );
    }
}

/// A glob's components below its root; the state is the index of the component the
/// directory's entries are matched against.
struct GlobWalk(Vec<Component>);

impl Walk for GlobWalk {
    type State = usize;
    const ENTERS: &'static str = "directories";

    fn step(
        &self,
        &at: &usize,
        files: &[String],
        dirs: &[String],
        members: &mut Vec<String>,
        next: &mut Vec<(String, usize)>,
    ) {
        let last = self.0.len() - 1;
        // A `**` may stand for no directory: the components after it apply here too.
        let mut active = vec![at];
        let mut j = at;
        while j < last && matches!(self.0[j], Component::AnyDirs) {
            j += 1;
            active.push(j);
        }
        for j in active {
            match &self.0[j] {
                // `**` crosses directories that are not containers; a final `**` takes
                // every container below.
                Component::AnyDirs => {
                    next.extend(
                        dirs.iter()
                            .filter(|d| !is_member_name(d))
                            .map(|d| (d.clone(), j)),
                    );
                    if j == last {
                        members.extend(containers(files, dirs));
                    }
                }
                c if j == last => {
                    members.extend(files.iter().chain(dirs).filter(|n| c.matches(n)).cloned());
                }
                c => next.extend(
                    dirs.iter()
                        .filter(|d| c.matches(d))
                        .map(|d| (d.clone(), j + 1)),
                ),
            }
        }
    }
}

/// Walks the directories below `root` from `start`, level by level, and returns the
/// members' paths below `root`, sorted and without repeats.
async fn walk<W: Walk>(
    root: &Location,
    what: &str,
    walk: &W,
    start: W::State,
) -> Result<Vec<String>> {
    let (mut rels, mut level, mut depth) = (Vec::new(), vec![(String::new(), start)], 0);
    while !level.is_empty() {
        if depth > MAX_DEPTH {
            return Err(DataFusionError::Plan(format!(
                "{what}/{}: {} nest deeper than {MAX_DEPTH}",
                level[0].0,
                W::ENTERS
            )));
        }
        let listings: Vec<_> = level
            .into_iter()
            .map(|(sub, state)| {
                let dir = match sub.is_empty() {
                    true => root.clone(),
                    false => root.child(&sub),
                };
                async move {
                    let (files, dirs) = dir.list_dir().await.map_err(to_df)?;
                    Ok::<_, DataFusionError>((sub, state, files, dirs))
                }
            })
            .collect();
        let listed: Vec<_> = futures::stream::iter(listings)
            .buffered(LIST_CONCURRENCY)
            .try_collect()
            .await?;
        level = Vec::new();
        for (sub, state, files, dirs) in listed {
            let (mut members, mut next) = (Vec::new(), Vec::new());
            walk.step(&state, &files, &dirs, &mut members, &mut next);
            let rel = |n: String| match sub.as_str() {
                "" => n,
                s => format!("{s}/{n}"),
            };
            rels.extend(members.into_iter().map(rel));
            level.extend(next.into_iter().map(|(d, s)| (rel(d), s)));
        }
        level.sort();
        level.dedup();
        depth += 1;
    }
    rels.sort();
    rels.dedup();
    Ok(rels)
}

/// See [`member_locations`].
pub(crate) async fn list_members(runtime: &RuntimeEnv, location: &str) -> Result<MemberList> {
    let trimmed = match location.trim_end_matches('/') {
        "" => location,
        t => t,
    };
    let parts: Vec<&str> = trimmed.split('/').collect();
    let Some(first) = parts.iter().position(|c| is_glob_component(c)) else {
        let root_location = resolve_location(runtime, trimmed)?;
        let rels = walk(&root_location, trimmed, &DirectoryWalk, ()).await?;
        return Ok(MemberList {
            root: trimmed.to_string(),
            root_location,
            rels,
        });
    };
    let root = match parts[..first].join("/") {
        r if !r.is_empty() => r,
        _ if trimmed.starts_with('/') => "/".to_string(),
        _ => ".".to_string(),
    };
    let components = parts[first..]
        .iter()
        .map(|c| match *c {
            "**" => Ok(Component::AnyDirs),
            c => Pattern::new(c).map(Component::Name).map_err(|e| {
                DataFusionError::Plan(format!("{location}: `{c}` is not a glob pattern: {e}"))
            }),
        })
        .collect::<Result<Vec<_>>>()?;
    let root_location = resolve_location(runtime, &root)?;
    let rels = walk(&root_location, &root, &GlobWalk(components), 0).await?;
    Ok(MemberList {
        root,
        root_location,
        rels,
    })
}

/// The containers `location` names when it is a glob or a directory: their locations,
/// sorted by path; empty when nothing matches.
///
/// - A glob: the location up to its first component with `*`, `?` or `[` is a
///   directory, and the rest is matched against the paths below it, component by
///   component (`data/year=*/station=north/*.b2nd`); `**` stands for any number of
///   directories that are not containers themselves (`data/**/*.b2nd`), and a final
///   `**` for every container below.
/// - A directory: its entries with a Blosc2 extension, and those of its hive partition
///   directories `key=value/`, at any depth.
///
/// Whether a directory is itself a container (a sparse frame, a bcolz root, a `.b2d`
/// store) is for the caller to find out first.
///
/// # Errors
/// A location that cannot be resolved or listed; a component that is not a glob pattern
/// (`[a-`); directories nested deeper than 32 levels below the root.
pub async fn member_locations(runtime: &RuntimeEnv, location: &str) -> Result<Vec<Location>> {
    Ok(list_members(runtime, location).await?.locations())
}
