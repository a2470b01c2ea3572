// The VS Code side of the queue tree: maps the model's NodeViews to TreeItems, listens to the
// emulator's change events (one `subscribe` for everything) and refreshes, debounced.
import * as vscode from 'vscode';
import type { Transport } from '../../emulator/clients/transport';
import { TREE_REFRESH_MS, batchDebounce, type Debounced } from '../core/debounce';
import type { ClockMode } from '../core/emulatorClock';
import { TreeModel, type ChangeEffect, type TreeNode } from './model';

export const VIEW_ID = 'quayside.queues';

export class QueueTreeProvider implements vscode.TreeDataProvider<TreeNode>, vscode.Disposable {
  readonly model: TreeModel;
  private readonly changed = new vscode.EventEmitter<TreeNode | TreeNode[] | undefined | void>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly rendered = new vscode.EventEmitter<void>();
  /** Fires after each refresh went out (tests wait on it). */
  readonly onDidRefresh = this.rendered.event;
  private view: vscode.TreeView<TreeNode> | undefined;
  private readonly debounced: Debounced<ChangeEffect>;
  private subscription: string | undefined;
  private readonly disposers: (() => void)[] = [];
  private running = false;
  /** How many change events arrived (for tests). */
  eventsSeen = 0;

  constructor(
    private readonly transport: Transport,
    opts: { debounceMs?: number; pageSize?: number } = {},
  ) {
    this.model = new TreeModel({ pageSize: opts.pageSize });
    this.debounced = batchDebounce(opts.debounceMs ?? TREE_REFRESH_MS, (effects) => this.fire(TreeModel.merge(effects)));
    this.disposers.push(
      transport.onEvent((e) => {
        if (e.event === 'clock') this.debounced.add(this.model.apply(e));
        if (e.event !== 'change' && e.event !== 'gap') return;
        // A queue panel subscribes on the same connection and gets its own copy of each change.
        if (this.subscription && e.subscription !== this.subscription) return;
        if (e.event === 'change') this.eventsSeen++;
        this.debounced.add(this.model.apply(e));
      }),
      // A new emulator, or the same one after a reconnect: subscribe again and reload.
      transport.onReconnect(() => {
        this.subscription = undefined;
        if (this.running) void this.subscribe();
      }),
    );
  }

  attach(view: vscode.TreeView<TreeNode>): void {
    this.view = view;
    this.updateBadge();
  }

  /** The emulator is (or is no longer) running; `clock`: its clock's mode. */
  setRunning(running: boolean, clock?: ClockMode): void {
    this.running = running;
    this.subscription = undefined;
    this.debounced.cancel();
    this.model.clock.setMode(running ? clock : undefined);
    this.model.setTransport(running ? this.transport : undefined);
    // Running: the tree is read once subscribed (a read before would be read again at once).
    if (running) void this.subscribe();
    else this.fire({ root: true, nodes: [] });
  }

  private async subscribe(): Promise<void> {
    try {
      const r = await this.transport.request('subscribe', {});
      this.subscription = r.subscription;
      // A virtual clock stands still until the next `clock` event: start from where it is.
      if (this.model.clock.virtual) this.model.clock.observe((await this.transport.request('clock.now', {})).now);
      // Whatever changed before the subscription is picked up by reloading.
      this.model.reset();
    } catch {
      /* the emulator went away again; the next reconnect retries (the tree shows what it can read) */
    }
    this.fire({ root: true, nodes: [] });
  }

  refresh(): void {
    if (this.running) this.model.reset();
    else this.model.setTransport(undefined);
    this.fire({ root: true, nodes: [] });
  }

  /** Refresh now what change events have queued (tests and commands that want to see results at once). */
  flush(): void {
    this.debounced.flush();
  }

  async loadMore(node: TreeNode): Promise<void> {
    if (node.kind !== 'loadMore' && node.kind !== 'folder') return;
    const folder = await this.model.loadMore(node);
    this.fire({ root: false, nodes: [folder] });
  }

  private fire(effect: ChangeEffect): void {
    if (effect.root) this.changed.fire(undefined);
    else if (effect.nodes.length) this.changed.fire(effect.nodes);
    // The badge and the context keys follow once the tree asked again (the counts are already in).
    this.updateBadge();
    this.rendered.fire();
  }

  private updateBadge(): void {
    if (!this.view) return;
    const dead = this.model.deadTotal();
    this.view.badge = dead > 0 ? { value: dead, tooltip: this.model.deadTooltip() } : undefined;
    void vscode.commands.executeCommand('setContext', 'quayside.empty', this.running && this.model.isEmpty);
  }

  getTreeItem(node: TreeNode): vscode.TreeItem {
    const v = this.model.view(node);
    const state =
      v.collapsible === 'none'
        ? vscode.TreeItemCollapsibleState.None
        : v.collapsible === 'expanded'
          ? vscode.TreeItemCollapsibleState.Expanded
          : vscode.TreeItemCollapsibleState.Collapsed;
    const item = new vscode.TreeItem(v.label, state);
    item.id = node.id;
    item.description = v.description;
    // The tooltip is left to resolveTreeItem (on hover): VS Code keeps one set here, and a queue's
    // gives the oldest wait as it is when read.
    item.contextValue = v.contextValue;
    if (v.icon) item.iconPath = new vscode.ThemeIcon(v.icon.id, v.icon.color ? new vscode.ThemeColor(v.icon.color) : undefined);
    if (v.command) item.command = { command: v.command.command, title: v.command.title, arguments: [node] };
    return item;
  }

  /** On hover: the tooltip afresh, so the oldest wait it gives has grown since the item was drawn. */
  resolveTreeItem(item: vscode.TreeItem, node: TreeNode): vscode.TreeItem {
    item.tooltip = this.model.view(node).tooltip;
    return item;
  }

  async getChildren(node?: TreeNode): Promise<TreeNode[]> {
    const out = await this.model.children(node);
    if (!node) {
      this.updateBadge();
    }
    return out;
  }

  getParent(node: TreeNode): TreeNode | undefined {
    return this.model.parent(node);
  }

  dispose(): void {
    this.debounced.cancel();
    for (const d of this.disposers.splice(0)) d();
    this.changed.dispose();
    this.rendered.dispose();
  }
}
