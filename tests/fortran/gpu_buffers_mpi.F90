! Fortran `use mpi` (or, built with -DTEMPI_TEST_MPIF_H, `include 'mpif.h'`) on GPU
! buffers (the emulated GPU of the mpi suite), 2 ranks: receives into device arrays
! through strided types, completed by every completion call (statuses and 1-based
! indices checked), persistent receives and sends, a type that reuses a freed handle, a
! GPU send that a barrier must post, and collectives on device arrays (datatype arrays,
! MPI_IN_PLACE). MPICH's bindings call MPI_X, so TEMPI sees them once its archive is in
! the program (the link recipes' --require-defined: mpif90 puts the MPI libraries after
! it); Open MPI's call PMPI_X, and TEMPI defines their entry points (wrap_fortran_ompi.cpp).
program gpu_buffers_mpi
#ifndef TEMPI_TEST_MPIF_H
  use mpi
#endif
  use gpu_buffers
  implicit none
#ifdef TEMPI_TEST_MPIF_H
  include 'mpif.h'
#endif
  integer :: rank, size, k, ierr, stride2, stride3, reqs(2), index, outcount, indices(2), every2
  integer :: st(MPI_STATUS_SIZE), sts(MPI_STATUS_SIZE, 2)
  integer :: counts(2), displs(2), types(2), rtypes(2)
  logical :: flag
  integer, pointer :: a(:), b(:)
  integer :: host(n), src(20)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  if (size /= 2) stop 'run on 2 ranks'
  call MPI_Type_vector(20, 1, 2, MPI_INTEGER, stride2, ierr)
  call MPI_Type_commit(stride2, ierr)

  src = values(20)
  if (rank == 0) then
    do k = 1, 5
      call MPI_Send(src, 20, MPI_INTEGER, 1, k, MPI_COMM_WORLD, ierr)
    end do
    do k = 11, 17
      call MPI_Send(src, 20, MPI_INTEGER, 1, k, MPI_COMM_WORLD, ierr)
    end do
  else
    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 1, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Wait(reqs(1), st, ierr)
    call check_strided('MPI_Wait', a, 2, 20)
    call free_device_array(a)

    a => device_array(sentinel)
    b => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 2, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Irecv(b, 1, stride2, 0, 3, MPI_COMM_WORLD, reqs(2), ierr)
    call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
    call check_strided('MPI_Waitall (1)', a, 2, 20)
    call check_strided('MPI_Waitall (2)', b, 2, 20)
    call free_device_array(a)
    call free_device_array(b)

    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 4, MPI_COMM_WORLD, reqs(1), ierr)
    flag = .false.
    do while (.not. flag)
      call MPI_Test(reqs(1), flag, MPI_STATUS_IGNORE, ierr)
    end do
    call check_strided('MPI_Test', a, 2, 20)
    call free_device_array(a)

    a => device_array(sentinel)
    call MPI_Recv_init(a, 1, stride2, 0, 5, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Start(reqs(1), ierr)
    call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
    call check_strided('MPI_Start', a, 2, 20)
    call MPI_Request_free(reqs(1), ierr)
    call free_device_array(a)

    ! The other completion calls, with statuses and 1-based indices.
    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 11, MPI_COMM_WORLD, reqs(2), ierr)
    reqs(1) = MPI_REQUEST_NULL
    call MPI_Waitany(2, reqs, index, st, ierr)
    if (index /= 2 .or. st(MPI_TAG) /= 11 .or. st(MPI_SOURCE) /= 0 .or. reqs(2) /= MPI_REQUEST_NULL) then
      print *, 'FAIL: MPI_Waitany index', index, 'tag', st(MPI_TAG)
      failures = failures + 1
    end if
    call check_strided('MPI_Waitany', a, 2, 20)
    call free_device_array(a)

    a => device_array(sentinel)
    b => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 12, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Irecv(b, 1, stride2, 0, 13, MPI_COMM_WORLD, reqs(2), ierr)
    outcount = 0
    k = 0
    do while (k < 2)
      call MPI_Testsome(2, reqs, outcount, indices, sts, ierr)
      if (outcount == MPI_UNDEFINED) exit
      do index = 1, outcount
        if (sts(MPI_TAG, index) /= 11 + indices(index)) then
          print *, 'FAIL: MPI_Testsome index', indices(index), 'tag', sts(MPI_TAG, index)
          failures = failures + 1
        end if
      end do
      k = k + outcount
    end do
    call check_strided('MPI_Testsome (1)', a, 2, 20)
    call check_strided('MPI_Testsome (2)', b, 2, 20)
    call free_device_array(a)
    call free_device_array(b)

    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 14, MPI_COMM_WORLD, reqs(1), ierr)
    reqs(2) = MPI_REQUEST_NULL
    call MPI_Waitsome(2, reqs, outcount, indices, MPI_STATUSES_IGNORE, ierr)
    if (outcount /= 1 .or. indices(1) /= 1) then
      print *, 'FAIL: MPI_Waitsome', outcount, indices(1)
      failures = failures + 1
    end if
    call check_strided('MPI_Waitsome', a, 2, 20)
    call free_device_array(a)

    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 15, MPI_COMM_WORLD, reqs(2), ierr)
    flag = .false.
    do while (.not. flag)
      call MPI_Testany(2, reqs, index, flag, st, ierr)
    end do
    if (index /= 2 .or. st(MPI_TAG) /= 15) then
      print *, 'FAIL: MPI_Testany index', index, 'tag', st(MPI_TAG)
      failures = failures + 1
    end if
    call check_strided('MPI_Testany', a, 2, 20)
    call free_device_array(a)

    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 16, MPI_COMM_WORLD, reqs(1), ierr)
    flag = .false.
    do while (.not. flag)
      call MPI_Request_get_status(reqs(1), flag, st, ierr)
    end do
    call check_strided('MPI_Request_get_status', a, 2, 20)
    flag = .false.
    do while (.not. flag)
      call MPI_Testall(1, reqs, flag, sts, ierr)
    end do
    if (sts(MPI_TAG, 1) /= 16 .or. reqs(1) /= MPI_REQUEST_NULL) then
      print *, 'FAIL: MPI_Testall tag', sts(MPI_TAG, 1)
      failures = failures + 1
    end if
    call free_device_array(a)

    a => device_array(sentinel)
    call MPI_Recv_init(a, 1, stride2, 0, 17, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Startall(1, reqs, ierr)
    call MPI_Waitall(1, reqs, sts, ierr)
    if (sts(MPI_TAG, 1) /= 17) then
      print *, 'FAIL: MPI_Startall then MPI_Waitall tag', sts(MPI_TAG, 1)
      failures = failures + 1
    end if
    call check_strided('MPI_Startall', a, 2, 20)
    call MPI_Request_free(reqs(1), ierr)
    call free_device_array(a)
  end if

  ! A type freed and another created (MPICH reuses the handle).
  call MPI_Type_free(stride2, ierr)
  call MPI_Type_vector(20, 1, 3, MPI_INTEGER, stride3, ierr)
  call MPI_Type_commit(stride3, ierr)
  if (rank == 0) then
    call MPI_Send(src, 20, MPI_INTEGER, 1, 6, MPI_COMM_WORLD, ierr)
  else
    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride3, 0, 6, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
    call check_strided('a type that reuses a freed handle', a, 3, 20)
    call free_device_array(a)
  end if

  ! A nonblocking send from the GPU, then a barrier that must post it.
  if (rank == 0) then
    a => device_array(sentinel)
    host = sentinel
    host(1:58:3) = src
    call upload(a, host)
    call MPI_Isend(a, 1, stride3, 1, 7, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
    call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
    call free_device_array(a)
  else
    host = sentinel
    call MPI_Recv(host, 20, MPI_INTEGER, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    if (any(host(1:20) /= src)) then
      print *, 'FAIL: MPI_Isend from the GPU then MPI_Barrier', host(1:4)
      failures = failures + 1
    end if
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
  end if

  ! A persistent send from the GPU, started twice.
  if (rank == 0) then
    a => device_array(sentinel)
    host = sentinel
    host(1:58:3) = src
    call upload(a, host)
    call MPI_Send_init(a, 1, stride3, 1, 8, MPI_COMM_WORLD, reqs(1), ierr)
    do k = 1, 2
      call MPI_Start(reqs(1), ierr)
      call MPI_Wait(reqs(1), st, ierr)
    end do
    call MPI_Request_free(reqs(1), ierr)
    call free_device_array(a)
  else
    do k = 1, 2
      host = sentinel
      call MPI_Recv(host, 20, MPI_INTEGER, 0, 8, MPI_COMM_WORLD, st, ierr)
      if (any(host(1:20) /= src) .or. st(MPI_TAG) /= 8) then
        print *, 'FAIL: persistent send from the GPU', k, host(1:4)
        failures = failures + 1
      end if
    end do
  end if

  ! Collectives on device arrays. MPI_Bcast through a strided type:
  a => device_array(sentinel)
  if (rank == 0) then
    host = sentinel
    host(1:58:3) = src
    call upload(a, host)
  end if
  call MPI_Bcast(a, 1, stride3, 0, MPI_COMM_WORLD, ierr)
  call check_strided('MPI_Bcast', a, 3, 20)
  call free_device_array(a)
  ! MPI_Alltoallw, a datatype per peer: 10 integers from the host to each peer, received
  ! every second element, the first peer's at the odd places and the second's at the even.
  call MPI_Type_vector(10, 1, 2, MPI_INTEGER, every2, ierr)
  call MPI_Type_commit(every2, ierr)
  a => device_array(sentinel)
  counts = [10, 10]
  displs = [0, 0]
  types = [MPI_INTEGER, MPI_INTEGER]
  rtypes = [every2, every2]
  call MPI_Alltoallw(src, counts, displs, types, a, [1, 1], [0, 4], rtypes, MPI_COMM_WORLD, ierr)
  host = download(a)
  if (any(host(1:20:2) /= src(1:10)) .or. any(host(2:20:2) /= src(1:10)) .or. any(host(21:n) /= sentinel)) then
    print *, 'FAIL: MPI_Alltoallw into the GPU', host(1:4)
    failures = failures + 1
  end if
  call free_device_array(a)
  call MPI_Type_free(every2, ierr)
  ! MPI_Iallreduce in place on a device array.
  a => device_array(rank + 1)
  call MPI_Iallreduce(MPI_IN_PLACE, a, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
  host = download(a)
  if (any(host /= 3)) then
    print *, 'FAIL: MPI_Iallreduce in place on the GPU', host(1:4)
    failures = failures + 1
  end if
  call free_device_array(a)

  call MPI_Type_free(stride3, ierr)
  call MPI_Finalize(ierr)
  if (failures > 0) error stop 1
#ifdef TEMPI_TEST_MPIF_H
  if (rank == 1) print '(a)', 'PASS: mpif.h on GPU buffers'
#else
  if (rank == 1) print '(a)', 'PASS: use mpi on GPU buffers'
#endif
end program
