/**
 * Slash commands as registered values. muse's own commands (`/help`, `/approve`, …), the skills of
 * the session's plugins, `SKILL.md` files and Markdown command files all register here the same
 * way; the prompt completes them with tab and `/help` lists them. A command either runs here (it
 * changes what the screen shows, or asks something first) or hands the typed line to the session,
 * which records it and runs it (a skill, `/approve <mode>`).
 *
 * A name is taken by whoever registers it first: muse's own commands come first, so a plugin or a
 * repository's file cannot take over `/exit` or `/approve`.
 *
 * @example
 * ```ts
 * const commands = new Registry()
 * commands.register({ name: "hello", description: "say hello", source: "my-plugin" })
 * commands.completions("/he") // ["/hello", "/help"]
 * ```
 */

/** What a command's `run` decided: it is done, or the typed line goes to the session. */
export type Outcome = "done" | "send"

export interface Invocation {
  /** The text after the name. */
  readonly arg: string
  /** The whole line as typed (trimmed). */
  readonly typed: string
  /** The typed line escaped for the screen. */
  readonly shown: string
}

export interface SlashCommand {
  readonly name: string
  readonly description: string
  /** Other names it answers to (not listed). */
  readonly aliases?: ReadonlyArray<string> | undefined
  /** Who brought it: `muse`, a plugin's name, a file. */
  readonly source: string
  /** Completions of the argument being typed. */
  readonly complete?: ((arg: string) => ReadonlyArray<string>) | undefined
  /** Runs it here; without it the typed line goes to the session. */
  readonly run?: ((input: Invocation) => Outcome) | undefined
}

export class Registry {
  private readonly commands: Array<SlashCommand> = []
  private readonly byName = new Map<string, SlashCommand>()

  /** Add a command; a name already taken stays with its first owner (the reason is returned). */
  register(command: SlashCommand): string | undefined {
    const taken = [command.name, ...(command.aliases ?? [])].find((n) => this.byName.has(n))
    if (taken !== undefined) {
      const owner = this.byName.get(taken)!
      return `/${taken} of ${command.source} is not used: ${owner.source === "muse" ? "muse has a command of that name" : `${owner.source} has it already`}`
    }
    this.commands.push(command)
    for (const n of [command.name, ...(command.aliases ?? [])]) this.byName.set(n, command)
    return undefined
  }

  get(name: string): SlashCommand | undefined {
    return this.byName.get(name)
  }

  /** In the order registered. */
  list(): ReadonlyArray<SlashCommand> {
    return this.commands
  }

  /** Every name and alias, sorted. */
  names(): Array<string> {
    return [...this.byName.keys()].sort()
  }

  /** What tab completes `text` to: a command name, or the argument of a command that completes its own. */
  completions(text: string): ReadonlyArray<string> {
    if (!text.startsWith("/")) return []
    const withArg = /^\/(\S+)\s+(\S*)$/.exec(text)
    if (withArg) {
      const command = this.byName.get(withArg[1]!)
      return (command?.complete?.(withArg[2]!) ?? []).map((c) => `/${withArg[1]} ${c}`)
    }
    if (/\s/.test(text)) return []
    return this.names()
      .filter((n) => `/${n}`.startsWith(text))
      .map((n) => `/${n}`)
  }
}
