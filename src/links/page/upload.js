// The upload link page: pick or drop one file, send it to this page's own URL with a progress
// bar, and show where it landed in the workspace. Plain ES2017, no build step; the page works as
// an ordinary form post without it.
//
// For tests, <body> carries:
//   data-state           "idle" | "uploading" | "done" | "failed" (absent until this script ran)
//   data-max-progress    the highest percent reached by the current upload
//   data-progress-events how many distinct percent values the current upload reported
//   data-selected        the name of the file chosen or dropped last
// and after a success #result carries data-name, data-size, data-sha256, data-uri and
// data-overwritten as the server sent them.
'use strict';

(function () {
  const main = document.getElementById('main');
  const form = document.getElementById('upload-form');
  const input = document.getElementById('file');
  const dropzone = document.getElementById('dropzone');
  const selected = document.getElementById('selected');
  const submit = document.getElementById('submit');
  const progressBox = document.getElementById('progress-box');
  const progress = document.getElementById('progress');
  const progressText = document.getElementById('progress-text');
  const status = document.getElementById('status');
  const alertBox = document.getElementById('error');
  const done = document.getElementById('done');
  const doneHeading = document.getElementById('done-heading');
  const result = document.getElementById('result');
  const copyButton = document.getElementById('copy-uri');
  const expires = document.getElementById('limit-expires');

  if (!main || !form || !input || !submit || !progress || !status || !alertBox || !result) {
    return; // Not the page this script was written for: leave the plain form alone.
  }

  const body = document.body;
  const maxBytes = Number(main.dataset.maxBytes) || 0;
  const maxText = main.dataset.max || formatBytes(maxBytes);
  const fixedName = main.dataset.filename || '';

  let chosen = null; // the File to send
  let busy = false; // an upload is under way
  let finished = false; // an upload succeeded: this page has done its work
  let lastPercent = -1;
  let lastAnnounced = -1;
  let events = 0;
  let maxPercent = 0;
  let dragDepth = 0;

  // ---- small helpers ----------------------------------------------------------------------

  function formatBytes(n) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let value = Number(n) || 0;
    let unit = 0;
    while (value >= 1024 && unit < units.length - 1) {
      value /= 1024;
      unit += 1;
    }
    if (unit === 0) {
      return value + ' B';
    }
    const rounded = value >= 100 ? Math.round(value) : Math.round(value * 10) / 10;
    return rounded + ' ' + units[unit];
  }

  function setState(state) {
    // No aria-busy on <main>: it would hold back the live region's announcements inside it.
    body.dataset.state = state;
  }

  function announce(text) {
    status.textContent = text;
  }

  function showError(text) {
    alertBox.textContent = text;
  }

  function clearError() {
    alertBox.textContent = '';
  }

  function setControlsDisabled(disabled) {
    input.disabled = disabled;
    submit.disabled = disabled;
    if (dropzone) {
      dropzone.setAttribute('aria-disabled', disabled ? 'true' : 'false');
      dropzone.classList.toggle('is-disabled', disabled);
    }
  }

  function uploadUrl() {
    const href = window.location.href;
    const hash = href.indexOf('#');
    return hash === -1 ? href : href.slice(0, hash);
  }

  function describeFile(file) {
    let text = 'Selected: ' + file.name + ' (' + formatBytes(file.size) + ')';
    if (fixedName) {
      text += ', to be saved as ' + fixedName;
    }
    return text + '.';
  }

  // ---- the limits shown in words -----------------------------------------------------------

  function showLimits() {
    const fixed = fixedName !== '';
    const overwrite = main.dataset.overwrite === 'true';
    Array.prototype.forEach.call(document.querySelectorAll('.when-fixed-name'), function (el) {
      el.hidden = !fixed;
    });
    Array.prototype.forEach.call(document.querySelectorAll('.when-free-name'), function (el) {
      el.hidden = fixed;
    });
    Array.prototype.forEach.call(document.querySelectorAll('.when-overwrite'), function (el) {
      el.hidden = !overwrite;
    });
    Array.prototype.forEach.call(document.querySelectorAll('.when-no-overwrite'), function (el) {
      el.hidden = overwrite;
    });

    if (!expires) {
      return;
    }
    const raw = expires.getAttribute('datetime') || '';
    const when = new Date(raw);
    if (!raw || isNaN(when.getTime())) {
      return;
    }
    let local;
    try {
      local = when.toLocaleString(undefined, { dateStyle: 'long', timeStyle: 'short' });
    } catch (e) {
      local = when.toLocaleString();
    }
    const minutes = Math.round((when.getTime() - Date.now()) / 60000);
    let relative;
    if (minutes <= 0) {
      relative = 'already expired';
    } else if (minutes < 90) {
      relative = 'in ' + minutes + (minutes === 1 ? ' minute' : ' minutes');
    } else if (minutes < 48 * 60) {
      relative = 'in about ' + Math.round(minutes / 60) + ' hours';
    } else {
      relative = 'in about ' + Math.round(minutes / 1440) + ' days';
    }
    expires.textContent = local + ' (' + relative + ')';
    expires.title = raw;
  }

  // ---- choosing a file ---------------------------------------------------------------------

  // Takes a file as the one to send; false (with the reason shown) when it cannot be sent.
  function choose(file) {
    if (busy || finished) {
      return false;
    }
    clearError();
    chosen = null;
    if (!file) {
      selected.hidden = true;
      selected.textContent = '';
      setState('idle');
      return false;
    }
    body.dataset.selected = file.name;
    selected.hidden = false;
    selected.textContent = describeFile(file);
    if (maxBytes > 0 && file.size > maxBytes) {
      selected.hidden = true;
      selected.textContent = '';
      fail(
        file.name + ' is ' + formatBytes(file.size) + ', larger than the ' + maxText +
          ' this link accepts. Choose a smaller file, or ask the assistant for a link with a larger limit.',
        'The file was not sent.'
      );
      try {
        input.value = '';
      } catch (e) {
        // Some browsers refuse to clear a file input; the size is checked again on sending.
      }
      return false;
    }
    chosen = file;
    setState('idle');
    return true;
  }

  function openPicker() {
    if (busy || finished) {
      return;
    }
    input.click();
  }

  input.addEventListener('change', function () {
    choose(input.files && input.files.length > 0 ? input.files[0] : null);
  });

  // ---- the drop zone -----------------------------------------------------------------------

  function droppedFolder(dataTransfer) {
    const items = dataTransfer.items;
    if (!items || items.length === 0 || typeof items[0].webkitGetAsEntry !== 'function') {
      return false;
    }
    const entry = items[0].webkitGetAsEntry();
    return Boolean(entry && entry.isDirectory);
  }

  function onDrop(event) {
    event.preventDefault();
    dragDepth = 0;
    dropzone.classList.remove('is-dragover');
    if (busy || finished) {
      return;
    }
    const dataTransfer = event.dataTransfer;
    const files = dataTransfer ? dataTransfer.files : null;
    if (!files || files.length === 0) {
      fail('Nothing to upload was dropped: drop a file from your computer, or choose one.', 'Nothing was sent.');
      return;
    }
    if (files.length > 1) {
      fail('Drop one file at a time: this link takes a single file.', 'Nothing was sent.');
      return;
    }
    if (droppedFolder(dataTransfer)) {
      fail('A folder cannot be uploaded: drop a single file, or zip the folder first.', 'Nothing was sent.');
      return;
    }
    try {
      input.files = files; // keep the form's own picker in step with what was dropped
    } catch (e) {
      // Older browsers cannot set it; the dropped file is sent from memory instead.
    }
    if (choose(files[0])) {
      upload(chosen);
    }
  }

  if (dropzone) {
    dropzone.hidden = false; // only useful with this script running
    dropzone.addEventListener('click', openPicker);
    dropzone.addEventListener('keydown', function (event) {
      if (event.key === 'Enter') {
        event.preventDefault();
        openPicker();
      } else if (event.key === ' ' || event.key === 'Spacebar') {
        event.preventDefault(); // no page scroll; a button acts when Space is released
      }
    });
    dropzone.addEventListener('keyup', function (event) {
      if (event.key === ' ' || event.key === 'Spacebar') {
        event.preventDefault();
        openPicker();
      }
    });
    dropzone.addEventListener('dragenter', function (event) {
      event.preventDefault();
      dragDepth += 1;
      if (!busy && !finished) {
        dropzone.classList.add('is-dragover');
      }
    });
    dropzone.addEventListener('dragover', function (event) {
      event.preventDefault();
      if (event.dataTransfer) {
        event.dataTransfer.dropEffect = busy || finished ? 'none' : 'copy';
      }
      if (!busy && !finished) {
        dropzone.classList.add('is-dragover');
      }
    });
    dropzone.addEventListener('dragleave', function () {
      dragDepth = Math.max(0, dragDepth - 1);
      if (dragDepth === 0) {
        dropzone.classList.remove('is-dragover');
      }
    });
    dropzone.addEventListener('drop', onDrop);
  }

  // A file dropped beside the zone must not make the browser leave this page to show the file.
  window.addEventListener('dragover', function (event) {
    if (!dropzone || !dropzone.contains(event.target)) {
      event.preventDefault();
      if (event.dataTransfer) {
        event.dataTransfer.dropEffect = 'none';
      }
    }
  });
  window.addEventListener('drop', function (event) {
    if (!dropzone || !dropzone.contains(event.target)) {
      event.preventDefault();
    }
  });

  // ---- sending -----------------------------------------------------------------------------

  function onProgress(event) {
    if (!event.lengthComputable || !(event.total > 0)) {
      progress.removeAttribute('value'); // indeterminate
      if (progressText) {
        progressText.textContent = formatBytes(event.loaded) + ' sent';
      }
      return;
    }
    const percent = Math.max(0, Math.min(100, Math.floor((event.loaded * 100) / event.total)));
    if (percent === lastPercent) {
      return;
    }
    lastPercent = percent;
    progress.value = percent;
    if (progressText) {
      progressText.textContent =
        percent + '% (' + formatBytes(event.loaded) + ' of ' + formatBytes(event.total) + ')';
    }
    events += 1;
    body.dataset.progressEvents = String(events);
    if (percent > maxPercent) {
      maxPercent = percent;
      body.dataset.maxProgress = String(maxPercent);
    }
    // Announce in steps of ten, not on every event, so a screen reader is not flooded.
    const step = Math.floor(percent / 10) * 10;
    if (percent >= 100) {
      if (lastAnnounced < 100) {
        lastAnnounced = 100;
        announce('All of it sent. Waiting for the workspace to store the file.');
      }
    } else if (step > lastAnnounced && step > 0) {
      lastAnnounced = step;
      announce('Uploading: ' + step + '%.');
    }
  }

  function parseJson(text) {
    try {
      return JSON.parse(text);
    } catch (e) {
      return null;
    }
  }

  function onAnswer(xhr) {
    const answer = parseJson(xhr.responseText);
    if (xhr.status >= 200 && xhr.status < 300 && answer && typeof answer.name === 'string') {
      succeed(answer);
      return;
    }
    let message;
    if (answer && typeof answer.error === 'string' && answer.error) {
      message = answer.error;
    } else if (xhr.status >= 200 && xhr.status < 300) {
      message = 'The server took the file but its answer could not be read. Ask the assistant whether the file arrived.';
    } else {
      const text = (xhr.status + ' ' + (xhr.statusText || '')).trim();
      message = 'The upload failed: the server answered ' + text + '.';
    }
    fail(message);
  }

  function upload(file) {
    if (busy || finished) {
      return;
    }
    if (!file) {
      fail('Choose a file first, with the file picker or by dropping one on the drop zone.', 'Nothing was sent.');
      input.focus();
      return;
    }
    if (maxBytes > 0 && file.size > maxBytes) {
      choose(file); // shows why
      return;
    }
    busy = true;
    clearError();
    lastPercent = -1;
    lastAnnounced = 0;
    events = 0;
    maxPercent = 0;
    body.dataset.progressEvents = '0';
    body.dataset.maxProgress = '0';
    progress.value = 0;
    if (progressText) {
      progressText.textContent = '0%';
    }
    progressBox.hidden = false;
    setControlsDisabled(true);
    setState('uploading');
    announce('Uploading ' + file.name + ' (' + formatBytes(file.size) + ').');

    const data = new FormData();
    data.append('file', file, file.name);

    const xhr = new XMLHttpRequest();
    xhr.open('POST', uploadUrl());
    xhr.setRequestHeader('Accept', 'application/json');
    xhr.upload.addEventListener('progress', onProgress);
    xhr.addEventListener('load', function () {
      onAnswer(xhr);
    });
    xhr.addEventListener('error', function () {
      fail('The connection broke before the server answered. Check your network and try again.');
    });
    xhr.addEventListener('abort', function () {
      fail('The upload was stopped before it finished. Try again.');
    });
    xhr.addEventListener('timeout', function () {
      fail('The server did not answer in time. Try again.');
    });
    xhr.send(data);
  }

  function succeed(answer) {
    busy = false;
    finished = true;
    const name = String(answer.name);
    const size = Number(answer.size);
    const sha256 = answer.sha256 ? String(answer.sha256) : '';
    const uri = answer.uri ? String(answer.uri) : '';
    const overwritten = answer.overwritten === true;

    progress.value = 100;
    if (progressText) {
      progressText.textContent = '100%';
    }
    result.dataset.name = name;
    result.dataset.size = String(size);
    result.dataset.sha256 = sha256;
    result.dataset.uri = uri;
    result.dataset.overwritten = String(overwritten);
    document.getElementById('result-name').textContent = name;
    document.getElementById('result-size').textContent = isFinite(size)
      ? formatBytes(size) + ' (' + size.toLocaleString('en') + ' bytes)'
      : '';
    document.getElementById('result-sha256').textContent = sha256;
    document.getElementById('result-uri').textContent = uri;
    document.getElementById('result-overwritten').textContent = overwritten
      ? 'Yes: the file that was there before is replaced'
      : 'No';
    if (copyButton) {
      copyButton.hidden = uri === '';
    }
    result.hidden = false;
    done.hidden = false;
    setControlsDisabled(true);
    setState('done');
    announce(
      'Uploaded ' + name + ' (' + formatBytes(size) + ')' + (overwritten ? ', replacing the file that was there' : '') +
        '. Its workspace URI is ' + uri + '. Give that URI to the assistant.'
    );
    if (doneHeading) {
      doneHeading.focus();
    }
  }

  // Shows why nothing (more) happened and lets the person try again.
  function fail(message, summary) {
    busy = false;
    showError(message);
    progressBox.hidden = true;
    setControlsDisabled(false);
    setState('failed');
    announce(
      summary ||
        (chosen
          ? 'Upload failed. Press Upload to try again, or choose another file.'
          : 'Upload failed. Choose a file and try again.')
    );
  }

  form.noValidate = true; // checked here, with a message that says what to do
  form.addEventListener('submit', function (event) {
    event.preventDefault();
    if (busy || finished) {
      return;
    }
    let file = chosen;
    if (!file && input.files && input.files.length > 0) {
      file = input.files[0];
      if (!choose(file)) {
        return;
      }
    }
    upload(file);
  });

  // ---- copying the URI ---------------------------------------------------------------------

  function selectUri() {
    const code = document.getElementById('result-uri');
    const selection = window.getSelection ? window.getSelection() : null;
    if (code && selection) {
      selection.selectAllChildren(code);
    }
  }

  if (copyButton) {
    copyButton.addEventListener('click', function () {
      const uri = result.dataset.uri || '';
      if (!uri) {
        return;
      }
      const manual = function () {
        selectUri();
        announce('The URI is selected: press Control+C (Command+C on a Mac) to copy it.');
      };
      if (navigator.clipboard && typeof navigator.clipboard.writeText === 'function') {
        navigator.clipboard.writeText(uri).then(function () {
          copyButton.textContent = 'Copied';
          announce('Copied the workspace URI.');
        }, manual);
      } else {
        manual();
      }
    });
  }

  window.addEventListener('beforeunload', function (event) {
    if (busy) {
      event.preventDefault();
      event.returnValue = '';
    }
  });

  showLimits();
  body.dataset.progressEvents = '0';
  body.dataset.maxProgress = '0';
  setState('idle');
})();
