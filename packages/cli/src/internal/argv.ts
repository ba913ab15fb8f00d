/**
 * Strict reading of the command line, before @effect/cli sees it: every flag must be one the
 * command knows (anywhere: before or after the task text), a misspelled one is an error that
 * names the closest known flag, `--` ends the flags, and the positional arguments (the task of
 * `muse run`, a session id) are taken out so nothing can read them as flags again.
 *
 * @example
 * ```ts
 * import * as Argv from "./argv.js"
 *
 * Argv.parse(["run", "fix it", "--dney", "run_shell:rm*"])
 * // Left: unknown flag --dney for muse run; did you mean --deny?
 * Argv.parse(["run", "--", "--text"])
 * // Right: { command: "run", flags: [], positionals: ["--text"], … }
 * ```
 */
import { Either } from "effect"

export interface FlagSpec {
  /** Without the dashes. */
  readonly name: string
  readonly alias?: string | undefined
  /** Takes a value (`--model x`, `--model=x`); otherwise a switch. */
  readonly value: boolean
  readonly repeatable?: boolean | undefined
  /** Accepted but not suggested (test-only flags). */
  readonly hidden?: boolean | undefined
}

const flag = (name: string, value: boolean, more: Partial<FlagSpec> = {}): FlagSpec => ({ name, value, ...more })

const SESSION_FLAGS: ReadonlyArray<FlagSpec> = [
  flag("model", true, { alias: "m" }),
  flag("approval-mode", true),
  flag("sandbox", true),
  flag("allow", true, { repeatable: true }),
  flag("deny", true, { repeatable: true }),
  flag("max-turns", true),
  flag("context-window", true),
  flag("no-crew", false),
  flag("no-worktrees", false),
  flag("trust", false),
  flag("cwd", true),
  flag("log", true),
  flag("script", true, { hidden: true })
]

const HELP = flag("help", false, { alias: "h" })

export interface CommandSpec {
  readonly flags: ReadonlyArray<FlagSpec>
  /** How many positional arguments: none, one optional (a session id), or any (the task text). */
  readonly positionals: "none" | "one" | "any"
}

/** The commands and their flags (`""` is `muse` itself, the interactive UI). */
export const COMMANDS: Readonly<Record<string, CommandSpec>> = {
  "": { flags: [...SESSION_FLAGS, HELP, flag("version", false)], positionals: "none" },
  run: {
    flags: [...SESSION_FLAGS, flag("output-format", true), flag("session-id", true), HELP],
    positionals: "any"
  },
  sessions: {
    flags: [flag("json", false), flag("cluster", false), flag("cwd", true), flag("log", true), HELP],
    positionals: "none"
  },
  runner: {
    flags: [flag("host", true), flag("port", true), flag("work-dir", true), flag("log", true), HELP],
    positionals: "none"
  },
  submit: {
    flags: [
      flag("repo", true),
      flag("model", true, { alias: "m" }),
      flag("approval-mode", true),
      flag("sandbox", true),
      flag("max-turns", true),
      flag("log", true),
      flag("script", true, { hidden: true }),
      HELP
    ],
    positionals: "any"
  },
  attach: { flags: [flag("json", false), flag("log", true), HELP], positionals: "one" },
  resume: {
    // --notice: a runner taking a session over tells its agent what did not move with it
    flags: [...SESSION_FLAGS, flag("output-format", true), flag("notice", true), HELP],
    positionals: "one"
  },
  replay: {
    flags: [flag("verify", false), flag("example", false), flag("cwd", true), flag("log", true), HELP],
    positionals: "one"
  },
  log: {
    flags: [
      flag("agent", true),
      flag("type", true),
      flag("json", false),
      flag("follow", false, { alias: "f" }),
      flag("cwd", true),
      flag("log", true),
      HELP
    ],
    positionals: "one"
  },
  view: {
    flags: [
      flag("out", true, { alias: "o" }),
      flag("open", false),
      flag("serve", false),
      flag("port", true),
      flag("cwd", true),
      flag("log", true),
      HELP
    ],
    positionals: "one"
  },
  trust: { flags: [flag("cwd", true), flag("revoke", false), flag("show", false), HELP], positionals: "none" },
  acp: { flags: [...SESSION_FLAGS, HELP], positionals: "none" },
  rewind: {
    flags: [flag("to", true), flag("force", false), flag("cwd", true), flag("script", true, { hidden: true }), HELP],
    positionals: "one"
  },
  fork: { flags: [flag("at", true), flag("json", false), flag("cwd", true), HELP], positionals: "one" }
}

export const commandNames = Object.keys(COMMANDS).filter((c) => c !== "")

/** Every flag of every command, by name and alias (a flag means the same in every command). */
const ALL = new Map<string, FlagSpec>()
for (const spec of Object.values(COMMANDS)) {
  for (const f of spec.flags) {
    ALL.set(f.name, f)
    if (f.alias) ALL.set(f.alias, f)
  }
}

export interface Parsed {
  /** The subcommand, or `""` for `muse` itself. */
  readonly command: string
  /** The flags, normalized (`--name value`, `--name`), in the order given. */
  readonly flags: ReadonlyArray<string>
  readonly positionals: ReadonlyArray<string>
  /** The hidden `--script <file>` (a scripted test model). */
  readonly script: string | undefined
  readonly help: boolean
  readonly version: boolean
}

/** Damerau–Levenshtein distance (adjacent swaps count once: `dney` → `deny` is 1). */
export const distance = (a: string, b: string): number => {
  const d: Array<Array<number>> = []
  for (let i = 0; i <= a.length; i++) d.push([i, ...Array<number>(b.length).fill(0)])
  for (let j = 0; j <= b.length; j++) d[0]![j] = j
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1)
      d[i]![j] = v
    }
  }
  return d[a.length]![b.length]!
}

/** The closest of `candidates` to `word`, if it is close enough to be a likely typo. */
export const closest = (word: string, candidates: ReadonlyArray<string>): string | undefined => {
  let best: string | undefined
  let bestD = Number.POSITIVE_INFINITY
  for (const c of candidates) {
    const dist = distance(word, c)
    if (dist < bestD) {
      best = c
      bestD = dist
    }
  }
  const prefix = best !== undefined && word.length >= 3 && (best.startsWith(word) || word.startsWith(best))
  return best !== undefined && (bestD <= Math.max(2, Math.floor(word.length / 3)) || prefix) ? best : undefined
}

export interface UsageError {
  readonly message: string
  readonly detail?: string | undefined
}

const display = (command: string) => (command === "" ? "muse" : `muse ${command}`)

const flagList = (command: string) =>
  COMMANDS[command]!.flags.filter((f) => !f.hidden)
    .map((f) => `--${f.name}`)
    .join(", ")

/** Show a token in a message (it came from the command line; it may hold anything). */
const quote = (s: string) => JSON.stringify(s)

const unknownFlag = (token: string, name: string, command: string | undefined): UsageError => {
  const cmd = command ?? ""
  const own = COMMANDS[cmd]!.flags.filter((f) => !f.hidden).map((f) => f.name)
  const near = closest(name, own)
  const elsewhere = Object.entries(COMMANDS)
    .filter(([c, spec]) => c !== cmd && spec.flags.some((f) => !f.hidden && f.name === name))
    .map(([c]) => display(c))
  const what = token.startsWith("--") ? "flag" : "option"
  return {
    message: `unknown ${what} ${quote(token).slice(1, -1) === token ? token : quote(token)} for ${display(cmd)}${
      near ? `; did you mean --${near}?` : elsewhere.length > 0 ? ` (it is a flag of ${elsewhere.join(", ")})` : ""
    }`,
    detail: `${display(cmd)} takes: ${flagList(cmd)}.${
      COMMANDS[cmd]!.positionals === "any" ? ' Text that starts with a dash goes after --: muse run -- "--text".' : ""
    }`
  }
}

/**
 * Check and split `argv` (without `node` and the script). Flags before the subcommand are moved
 * after it. Errors say what is wrong and what would be right.
 */
export const parse = (argv: ReadonlyArray<string>): Either.Either<Parsed, UsageError> => {
  let command: string | undefined
  const seen: Array<{ readonly spec: FlagSpec; readonly token: string; readonly value?: string | undefined }> = []
  const positionals: Array<string> = []
  let ended = false
  for (let i = 0; i < argv.length; i++) {
    const t = argv[i]!
    if (ended) {
      positionals.push(t)
      continue
    }
    if (t === "--") {
      ended = true
      continue
    }
    const isLong = t.startsWith("--")
    const isShort = !isLong && t.startsWith("-") && t.length > 1
    if (isLong || isShort) {
      const body = t.slice(isLong ? 2 : 1)
      const eq = body.indexOf("=")
      const name = eq === -1 ? body : body.slice(0, eq)
      const inline = eq === -1 ? undefined : body.slice(eq + 1)
      const spec = ALL.get(name)
      if (!spec || (isShort && spec.alias !== name) || (isLong && spec.name !== name)) {
        return Either.left(unknownFlag(isLong ? `--${name}` : `-${name}`, name, command))
      }
      if (spec.value) {
        let value = inline
        if (value === undefined) {
          if (i + 1 >= argv.length) {
            return Either.left({ message: `--${spec.name} needs a value`, detail: `e.g. --${spec.name} <value>` })
          }
          value = argv[++i]!
        }
        seen.push({ spec, token: t, value })
      } else {
        if (inline !== undefined) {
          return Either.left({ message: `--${spec.name} takes no value (got ${quote(inline)})` })
        }
        seen.push({ spec, token: t })
      }
      continue
    }
    if (command === undefined && positionals.length === 0 && t !== "-" && COMMANDS[t] && t !== "") {
      command = t
      continue
    }
    positionals.push(t)
  }
  const cmd = command ?? ""
  const spec = COMMANDS[cmd]!
  for (const s of seen) {
    if (!spec.flags.some((f) => f.name === s.spec.name)) {
      return Either.left(unknownFlag(`--${s.spec.name}`, s.spec.name, cmd))
    }
  }
  const help = seen.some((s) => s.spec.name === "help")
  const version = seen.some((s) => s.spec.name === "version")
  for (const f of spec.flags) {
    if (f.repeatable) continue
    if (seen.filter((s) => s.spec.name === f.name).length > 1) {
      return Either.left({ message: `--${f.name} is given more than once` })
    }
  }
  if (cmd === "" && positionals.length > 0) {
    const word = positionals[0]!
    const near = closest(word, commandNames)
    return Either.left({
      message: `unknown command ${quote(word)}${near ? `; did you mean muse ${near}?` : ""}`,
      detail: `Commands: ${commandNames.join(", ")}. To run a task headless: muse run ${quote(positionals.join(" "))}`
    })
  }
  if (spec.positionals === "none" && positionals.length > 0) {
    return Either.left({
      message: `${display(cmd)} takes no arguments (got ${quote(positionals[0]!)})`,
      detail: `${display(cmd)} --help says what it takes.`
    })
  }
  if (spec.positionals === "one" && positionals.length > 1) {
    return Either.left({
      message: `${display(cmd)} takes at most one session id (got ${positionals.map(quote).join(", ")})`
    })
  }
  const flags: Array<string> = []
  let script: string | undefined
  for (const s of seen) {
    if (s.spec.name === "script") script = s.value
    else if (s.value !== undefined) flags.push(`--${s.spec.name}`, s.value)
    else flags.push(`--${s.spec.name}`)
  }
  return Either.right({ command: cmd, flags, positionals, script, help, version })
}
