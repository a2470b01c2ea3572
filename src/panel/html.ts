// The queue panel's HTML: a static shell (no data in it but the queue's name, escaped), a strict
// Content-Security-Policy with a nonce, the bundled script and the stylesheet. No VS Code here, so the
// webview tests render exactly this in Chromium.

import type { QueueRef } from './messages';

export interface PanelHtmlOptions {
  /** `webview.cspSource`. */
  cspSource: string;
  /** The bundled webview script (media/panel/dist/panel.js) as a webview URI. */
  scriptUri: string;
  /** media/panel/panel.css as a webview URI. */
  styleUri: string;
  nonce: string;
  ref: QueueRef;
}

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** 32 random alphanumerics. */
export function makeNonce(random: (n: number) => Uint8Array): string {
  const chars = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  return Array.from(random(32), (b) => chars[b % chars.length]).join('');
}

export function contentSecurityPolicy(cspSource: string, nonce: string): string {
  return [
    "default-src 'none'",
    `style-src ${cspSource}`,
    `font-src ${cspSource}`,
    `img-src ${cspSource} data:`,
    `script-src 'nonce-${nonce}'`,
    "connect-src 'none'",
    "frame-src 'none'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
}

export function renderPanelHtml(o: PanelHtmlOptions): string {
  const e = escapeHtml;
  const title = `${o.ref.queue} · ${o.ref.namespace}`;
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${e(contentSecurityPolicy(o.cspSource, o.nonce))}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="${e(o.styleUri)}">
<title>${e(title)}</title>
</head>
<body data-namespace="${e(o.ref.namespace)}" data-queue="${e(o.ref.queue)}">
<header class="top">
  <div class="title">
    <h1 id="queue-name">${e(o.ref.queue)}</h1>
    <span class="ns" id="queue-ns">${e(o.ref.namespace)}</span>
    <span class="dialect" id="queue-dialect"></span>
    <span class="live" id="live" title="Live: refreshes when the queue changes">live</span>
  </div>
  <div class="counts" id="counts" aria-label="Counts"></div>
</header>
<div class="banner hidden" id="banner" role="alert"><span id="banner-text"></span><button id="banner-retry" class="secondary">Retry</button></div>
<nav class="tabs" role="tablist">
  <button role="tab" data-tab="messages" id="tab-messages" aria-controls="view-messages">Messages</button>
  <button role="tab" data-tab="dead" id="tab-dead" aria-controls="view-dead"><span id="dead-label">Dead letters</span> <span class="pill" id="dead-pill"></span></button>
  <button role="tab" data-tab="push" id="tab-push" aria-controls="view-push">Push</button>
  <button role="tab" data-tab="metrics" id="tab-metrics" aria-controls="view-metrics">Metrics</button>
  <button role="tab" data-tab="audit" id="tab-audit" aria-controls="view-audit">Audit log</button>
</nav>
<main>
  <section class="view" id="view-messages" role="tabpanel" aria-labelledby="tab-messages">
    <div class="toolbar">
      <div class="chips" id="state-filter" role="group" aria-label="States"></div>
      <input type="search" id="search" placeholder="Search bodies…" aria-label="Search bodies" spellcheck="false">
      <span class="spacer"></span>
      <button id="msg-export-selected" class="secondary" disabled>Export selected</button>
      <select id="msg-export-format" aria-label="Export format"><option value="json">JSON</option><option value="ndjson">NDJSON</option></select>
      <button id="msg-export-all" class="secondary">Export all</button>
      <button id="msg-purge" class="danger secondary" title="Delete ready, delayed and leased messages">Purge…</button>
    </div>
    <div class="split">
      <div class="list">
        <table class="grid" id="msg-table">
          <thead><tr>
            <th class="check"><input type="checkbox" id="msg-select-page" aria-label="Select page"></th>
            <th>ID</th><th>State</th><th class="body-col">Body</th><th class="num">Attempts</th><th>Enqueued</th><th>Visible / lease</th>
          </tr></thead>
          <tbody id="msg-rows"></tbody>
        </table>
        <div class="empty hidden" id="msg-empty"></div>
        <div class="pager" id="msg-pager">
          <button id="msg-prev" class="secondary" aria-label="Previous page">‹ Prev</button>
          <span id="msg-range"></span>
          <button id="msg-next" class="secondary" aria-label="Next page">Next ›</button>
          <span class="spacer"></span>
          <label>Page size <select id="msg-page-size"></select></label>
        </div>
      </div>
      <aside class="detail" id="detail" aria-label="Message detail"><div class="placeholder">Select a message to see its detail.</div></aside>
    </div>
  </section>

  <section class="view" id="view-dead" role="tabpanel" aria-labelledby="tab-dead">
    <div class="toolbar">
      <button id="dead-replay-selected" disabled>Replay selected</button>
      <button id="dead-discard-selected" class="danger secondary" disabled>Discard selected</button>
      <span class="sep"></span>
      <button id="dead-replay-all" class="secondary">Replay all</button>
      <button id="dead-purge-all" class="danger secondary">Purge all</button>
      <span class="spacer"></span>
      <span id="dead-selection" class="muted"></span>
    </div>
    <div class="split">
      <div class="list">
        <table class="grid" id="dead-table">
          <thead><tr>
            <th class="check"><input type="checkbox" id="dead-select-page" aria-label="Select page"></th>
            <th>ID</th><th>Reason</th><th>Last error</th><th class="num">Attempts</th><th id="dead-since-head">Dead since</th><th class="body-col">Body</th>
          </tr></thead>
          <tbody id="dead-rows"></tbody>
        </table>
        <div class="empty hidden" id="dead-empty"></div>
        <div class="pager">
          <button id="dead-prev" class="secondary" aria-label="Previous page">‹ Prev</button>
          <span id="dead-range"></span>
          <button id="dead-next" class="secondary" aria-label="Next page">Next ›</button>
        </div>
      </div>
      <aside class="detail" id="dead-detail" aria-label="Dead letter detail"><div class="placeholder" id="dead-hint">Select a dead letter to see why it failed.</div></aside>
    </div>
  </section>

  <section class="view" id="view-push" role="tabpanel" aria-labelledby="tab-push">
    <form id="push-form" class="push" novalidate>
      <div class="field wide">
        <label for="push-body">Body (JSON)</label>
        <textarea id="push-body" rows="10" spellcheck="false" aria-describedby="push-body-error">{
  "hello": "world"
}</textarea>
        <div class="error" id="push-body-error" role="alert"></div>
        <div class="row"><button type="button" id="push-format" class="secondary">Format JSON</button></div>
      </div>
      <div class="field">
        <label for="push-delay">Delay (seconds)</label>
        <input id="push-delay" type="text" inputmode="decimal" placeholder="0">
        <div class="error" id="push-delaySeconds-error" role="alert"></div>
      </div>
      <div class="field">
        <label for="push-dedupe">Dedupe key</label>
        <input id="push-dedupe" type="text" placeholder="none" spellcheck="false">
        <div class="error" id="push-dedupeKey-error" role="alert"></div>
      </div>
      <div class="field">
        <label for="push-count">Send ×N</label>
        <input id="push-count" type="text" inputmode="numeric" placeholder="1">
        <div class="error" id="push-count-error" role="alert"></div>
      </div>
      <div class="field wide">
        <label for="push-attributes">Attributes (JSON object)</label>
        <textarea id="push-attributes" rows="3" spellcheck="false" placeholder='{"source": "panel"}'></textarea>
        <div class="error" id="push-attributes-error" role="alert"></div>
      </div>
      <div class="actions wide">
        <button type="submit" id="push-send">Send</button>
        <span id="push-result" class="muted" role="status"></span>
      </div>
    </form>
  </section>

  <section class="view" id="view-metrics" role="tabpanel" aria-labelledby="tab-metrics">
    <div class="cards" id="metric-cards"></div>
    <div class="chart-box">
      <div class="chart-head">
        <h2>Last 24 hours</h2>
        <span class="legend"><span class="swatch depth"></span>Peak depth <span class="swatch wait"></span>Oldest message wait</span>
      </div>
      <div class="chart" id="chart"></div>
      <div class="tooltip hidden" id="chart-tip" role="tooltip"></div>
    </div>
  </section>

  <section class="view" id="view-audit" role="tabpanel" aria-labelledby="tab-audit">
    <div class="toolbar"><button id="audit-refresh" class="secondary">Refresh</button><span class="spacer"></span><span class="muted">Replays and purges of this queue, newest first</span></div>
    <table class="grid" id="audit-table">
      <thead><tr><th>When</th><th>Action</th><th class="num">Messages</th><th>Token</th><th>Detail</th></tr></thead>
      <tbody id="audit-rows"></tbody>
    </table>
    <div class="empty hidden" id="audit-empty">No replays or purges yet.</div>
  </section>
</main>
<div class="toast hidden" id="toast" role="status"></div>
<script nonce="${e(o.nonce)}" src="${e(o.scriptUri)}"></script>
</body>
</html>
`;
}
